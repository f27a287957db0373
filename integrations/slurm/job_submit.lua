--[[
herd's node choice for Slurm (S2: Akhmetshin & Yuldashev's contention-aware
node selection), as a job_submit plugin.

slurmctld calls slurm_job_submit while it holds its locks, so this script
does no network I/O and starts no process: it reads one small local file,
the prediction table that `herd slurm watch` keeps fresh (written whole and
renamed into place, so a read never sees half a table).

A job takes part when its comment is `herd:KEY`, where KEY is
`hint=high|medium|low` or a program key from herd's profile database
(`sbatch --comment "herd:hint=high" ...`). For that key and the job's CPU
count the table says one of:
  require NODE  the model's best node has room: the job is sent there
  prefer NODE   the best node is full: a soft preference for it (Slurm's
                --prefer, with each node carrying the feature herd_NODE)
  any           no node is predicted better than another: Slurm decides
A job that names its own nodes, has no herd comment, or meets a missing or
stale table is left exactly as submitted.

Settings (environment of slurmctld):
  HERD_SLURM_TABLE            the table (default /var/lib/herd/slurm-table)
  HERD_SLURM_TABLE_MAX_AGE_S  ignore a table older than this (default 120)
]]

local TABLE = os.getenv("HERD_SLURM_TABLE") or "/var/lib/herd/slurm-table"
local MAX_AGE_S = tonumber(os.getenv("HERD_SLURM_TABLE_MAX_AGE_S") or "120")
-- Slurm's "no value" for unset numbers (NO_VAL; NO_VAL16 for 16-bit fields).
local NO_VAL = 4294967294
local NO_VAL16 = 65534

-- A number Slurm has set: not nil, not its "no value", at least 1.
local function set(v, no_val)
  if v == nil or v >= no_val or v < 1 then
    return nil
  end
  return v
end

local function split_tabs(line)
  local fields = {}
  for field in string.gmatch(line, "[^\t]+") do
    fields[#fields + 1] = field
  end
  return fields
end

-- The decision for (key, cpus): the entry of the largest thread count not
-- above cpus (the smallest one when cpus is below them all).
local function lookup(key, cpus)
  local f = io.open(TABLE, "r")
  if f == nil then
    return nil, "no table at " .. TABLE
  end
  local header = f:read("*l")
  if header ~= "herd-slurm-table\t1" then
    f:close()
    return nil, "not a herd table (version 1): " .. TABLE
  end
  local best, smallest
  for line in f:lines() do
    local v = split_tabs(line)
    if v[1] == "written" then
      local age = os.time() - (tonumber(v[2]) or 0)
      if age > MAX_AGE_S then
        f:close()
        return nil, string.format("table is %d s old (more than %d): is herd slurm watch running?", age, MAX_AGE_S)
      end
    elseif v[1] == "place" and v[2] == key then
      local threads = tonumber(v[3])
      local entry = { threads = threads, action = v[4], node = v[5], why = v[6] }
      if threads <= cpus and (best == nil or threads > best.threads) then
        best = entry
      end
      if smallest == nil or threads < smallest.threads then
        smallest = entry
      end
    end
  end
  f:close()
  local entry = best or smallest
  if entry == nil then
    return nil, "no entry for herd:" .. key
  end
  return entry, nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local comment = job_desc.comment
  if comment == nil then
    return slurm.SUCCESS
  end
  local key = string.match(comment, "^herd:(.+)$")
  if key == nil then
    return slurm.SUCCESS
  end
  if job_desc.req_nodes ~= nil and job_desc.req_nodes ~= "" then
    slurm.log_info("herd: job %s names its nodes (%s); left alone", tostring(job_desc.name), job_desc.req_nodes)
    return slurm.SUCCESS
  end
  -- CPUs the job asks for: --mincpus, or tasks x CPUs per task (-n N -c M),
  -- whichever is larger; 1 when neither is given.
  local cpus = set(job_desc.min_cpus, NO_VAL) or 1
  local tasks = set(job_desc.num_tasks, NO_VAL)
  if tasks then
    cpus = math.max(cpus, tasks * (set(job_desc.cpus_per_task, NO_VAL16) or 1))
  end
  local entry, err = lookup(key, cpus)
  if entry == nil then
    slurm.log_info("herd: %s; job %s left as submitted", err, tostring(job_desc.name))
    return slurm.SUCCESS
  end
  if entry.action == "require" then
    job_desc.req_nodes = entry.node
  elseif entry.action == "prefer" then
    job_desc.prefer = "herd_" .. entry.node
  end
  slurm.log_info("herd: job %s (herd:%s, %d CPUs): %s %s: %s", tostring(job_desc.name), key, cpus,
    entry.action, entry.node or "-", entry.why or "")
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
