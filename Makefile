# herd: two commands for a new user.
#   make run   installs what is missing, builds in release mode, shows the machine and
#              what herd can do on it, then co-schedules a real batch against plain Linux
#              (five alternated rounds, the ratio with its interval)
#   make test  the same set-up, then every test (fmt, clippy, unit, integration)

# Debian packages herd needs: hwloc's library and headers (topology), libudev
# (hwloc links it), pkg-config (finds hwloc and SQLite), bzip2 (test fixtures are
# .tar.bz2), libsqlite3-dev (the profile database), and Slurm with munge for the
# Slurm integration and its end-to-end test (not the slurm-wlm metapackage,
# whose emulator build breaks slurmctld), and real programs no one here wrote
# that the tests run under herd (stress-ng, sysbench, rt-tests' hackbench).
APT_PACKAGES := hwloc libhwloc-dev libudev-dev pkg-config bzip2 libsqlite3-dev \
	slurmctld slurmd slurm-client munge libslurm-dev stress-ng sysbench rt-tests
CARGO ?= cargo
HERD := target/release/herd

.PHONY: run test deps build workloads

# Small real programs for tests and demos (see workloads/).
WORKLOADS := stream compute phases barrier amdahl switch_probe palm_bound
WORKLOAD_BINS := $(addprefix target/workloads/,$(WORKLOADS))
# Workloads that report progress through herd's heartbeat library (S4).
HB_LIB := target/release/libherd_heartbeat.a
HB_WORKLOADS := target/workloads/beats target/workloads/barrier-hb

target/workloads/%: workloads/%.c workloads/common.h
	@mkdir -p target/workloads
	$(CC) -O2 -Wall -Wextra -pthread -o $@ $<

$(HB_LIB): crates/heartbeat/src/lib.rs crates/heartbeat/Cargo.toml
	$(CARGO) build --release -p herd-heartbeat

target/workloads/beats: workloads/beats.c workloads/common.h crates/heartbeat/include/herd_heartbeat.h $(HB_LIB)
	@mkdir -p target/workloads
	$(CC) -O2 -Wall -Wextra -pthread -Icrates/heartbeat/include -o $@ $< $(HB_LIB) -ldl -lm

target/workloads/barrier-hb: workloads/barrier.c workloads/common.h crates/heartbeat/include/herd_heartbeat.h $(HB_LIB)
	@mkdir -p target/workloads
	$(CC) -O2 -Wall -Wextra -pthread -DHERD_HEARTBEAT -Icrates/heartbeat/include -o $@ $< $(HB_LIB) -ldl -lm

workloads: $(WORKLOAD_BINS) $(HB_WORKLOADS)

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }

build: deps workloads
	$(CARGO) build --release --workspace

# The main job: herd's bandwidth-aware co-scheduler against plain Linux on a
# batch this machine has contention in (two memory streamers slow each
# other; a streamer beside a compute loop loses nothing), five alternated
# rounds, with the interval and a sentence saying what herd won.
run: build
	$(HERD) topo
	@echo
	$(HERD) doctor
	@echo
	python3 scripts/bench.py --only herd-mix --policy bw:iabw --repeat 5

test: deps workloads
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace
