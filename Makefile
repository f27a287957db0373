# herd: two commands for a new user.
#   make run   installs what is missing, builds in release mode, shows the machine and
#              what herd can do on it, then co-schedules a real batch against plain Linux
#              (a `make -j2` build beside `xz -T2`, herd's default policy, six
#              alternated rounds: the ratio with its interval)
#   make test  the same set-up, then every test (fmt, clippy, unit, integration, and a
#              short real-kernel subset in an emulated two-socket guest)

# Debian packages herd needs: hwloc's library and headers (topology), libudev
# (hwloc links it), pkg-config (finds hwloc and SQLite), bzip2 (test fixtures are
# .tar.bz2), libsqlite3-dev (the profile database), and Slurm with munge for the
# Slurm integration and its end-to-end test (not the slurm-wlm metapackage,
# whose emulator build breaks slurmctld), and real programs no one here wrote
# that the tests run under herd (stress-ng, sysbench, rt-tests' hackbench), and
# the tools `make run`'s demo builds and compresses with (make, gcc, xz), and
# clang with libbpf's headers to build herd's eBPF program (crates/runtime/bpf).
APT_PACKAGES := hwloc libhwloc-dev libudev-dev pkg-config bzip2 libsqlite3-dev \
	slurmctld slurmd slurm-client munge libslurm-dev stress-ng sysbench rt-tests \
	prometheus make gcc xz-utils clang libbpf-dev
CARGO ?= cargo
HERD := target/release/herd

.PHONY: run test deps build workloads vm-deps vm-test vm-test-quick fuzz bench-smoke

# Real kernels of other shapes (issue 24): Debian's kernel under QEMU with
# TCG emulation, the host's root shared read-only (scripts/vm/).
VM_PACKAGES := qemu-system-x86 linux-image-amd64 busybox-static file

# Small real programs for tests and demos (see workloads/).
WORKLOADS := stream compute phases barrier amdahl switch_probe palm_bound vfork_hold
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

# Installs the Debian packages of $(1) that are missing, with apt's extra
# options $(2).
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(2) $$missing >/dev/null; \
	fi
endef

deps:
	$(call install_missing,$(APT_PACKAGES),)
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }

build: deps workloads
	$(CARGO) build --release --workspace

# The main job: herd's default co-scheduler against plain Linux on a batch
# this machine has contention in: a `make -j2` build and `xz -T2`, each a
# process tree no one here wrote, use less CPU time apart than side by side
# (docs/results.md, twenty-ninth session). Six alternated rounds, with the
# interval and a sentence saying what herd won.
run: build
	$(HERD) topo
	@echo
	$(HERD) doctor
	@echo
	python3 scripts/bench.py --workloads bench/tools.toml --only trees --policy cosched:fair --repeat 6

test: deps workloads
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace
	$(MAKE) bench-smoke
	$(MAKE) vm-test-quick

# Every bench once at a tiny size, so none rots unseen (the simulator's
# scale bench panicked for weeks before anyone ran it): each checks it ran
# what it says (the scale bench, that its run lasted the horizon), never
# its speed. The real runs: `cargo bench -p herd-sim --bench scale` etc.
bench-smoke:
	HERD_BENCH_HORIZON_S=20 HERD_BENCH_GROWTH_S=5 HERD_BENCH_SIZES=64/16,256/128 $(CARGO) bench -q -p herd-sim --bench scale -- linux
	HERD_BENCH_HORIZON_S=1 $(CARGO) bench -q -p herd-sim --bench decide -- bw:oracle
	HERD_BENCH_DECISIONS=5 $(CARGO) bench -q -p herd-policy --bench amp
	HERD_BENCH_DECISIONS=2 $(CARGO) bench -q -p herd-policy --bench scale
	HERD_BENCH_CALLS=50 $(CARGO) bench -q -p herd-runtime --bench affinity
	HERD_BENCH_THREADS=16,64 HERD_BENCH_PROCESSES=8 HERD_BENCH_TURNS=3 $(CARGO) bench -q -p herd-runtime --bench live_turn
	# Bad input (an unknown policy, a count of 0...) is named before
	# anything runs, exit 2, in every bench.
	scripts/bench-bad-input.sh $(CARGO)

vm-deps:
	$(call install_missing,$(VM_PACKAGES),--no-install-recommends)

# A short subset, part of `make test`: one guest (two sockets, SMT, two NUMA
# nodes) and the checks that a defect fixed here would break again. A guest
# that stalls (once, in a fresh-clone run, in `herd doctor`; not seen in the
# runs since) is started once more; a check that fails is never retried, and
# a herd command that hangs fails its check with its threads' kernel stacks.
vm-test-quick: build vm-deps
	python3 scripts/vm/guest.py --topology 2s2c2t --timeout 600 --stall-retries 1 -- \
	  /usr/bin/python3 $(CURDIR)/scripts/vm/checks.py 2s2c2t topo doctor numa-model-spreads numa-model-shares batch-cpuset-mems memory-follow \
	  sched-bpf

# Every shape, every check (a few minutes each: emulated guests are slow).
vm-test: build vm-deps
	@for t in 2s2c2t 4n2c 1s4c2t; do \
	  echo "== guest $$t"; \
	  python3 scripts/vm/guest.py --topology $$t --timeout 900 -- \
	    /usr/bin/python3 $(CURDIR)/scripts/vm/checks.py $$t || fail=1; \
	done; exit $${fail:-0}

# The parsers under libFuzzer (nightly Rust and cargo-fuzz, installed here
# if missing) for FUZZ_SECONDS; crashes land in fuzz/artifacts/, to be
# fixed and copied to fuzz/regressions/ (the suite replays those).
FUZZ_SECONDS ?= 600
fuzz:
	@command -v rustup >/dev/null && rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	python3 scripts/fuzz-seeds.py
	cd fuzz && $(CARGO) +nightly fuzz run parsers corpus/parsers -- -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=8192 -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1
