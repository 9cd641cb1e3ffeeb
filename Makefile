# docfs — build, run a demo mount, test, benchmark.
#
#   make            install system deps if missing (as root; else name them and stop), build (release)
#   make run        install FUSE deps if missing, build, mount the demo store at ./mnt
#   make test       install FUSE deps if missing, build, run unit and mounted tests and the model test;
#                   the remote tests (DocFSRemoteTests) run against a throwaway PostgreSQL cluster and
#                   moto S3 server on 127.0.0.1 that Tests/remote/servers.sh starts and stops (by PID),
#                   and so does the two-replica model test (make replica-model); last, where the kernel
#                   has FUSE over io_uring and may be told to offer it (as root), make test-io-uring
#   make test-io-uring  the mounted tests again with every mount over FUSE over io_uring (as root)
#   make fuzz       the model-based random test with random seeds, for longer
#   make bench-replicas  write-to-readable latency between two replicas, init --remote of a large tree,
#                        drain of a cp -r beside rclone copy, bytes sent for edits of a large file;
#                        BENCH_REPLICAS=fanout / writers: N = 10, 100, 1,000 replicas in one process
#                        (docfs-scale replicas), a change's time to all of them; W = 1, 10, 50 writers
#   make install    the binary, the mount(8) helper, bash/zsh/fish completions and the man page
#                   (PREFIX, DESTDIR, SBINDIR, ...); make uninstall removes exactly them

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
# mount(8) looks for mount.fuse.docfs in /sbin only (its compiled-in search path), whatever PREFIX is.
SBINDIR    ?= /sbin
MANDIR     ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
# Completions and the man page, generated from the argument-parser definitions (never kept by hand).
GENERATED   = $(CURDIR)/.build/generated
INSTALLED   = $(DESTDIR)$(BINDIR)/docfs $(DESTDIR)$(SBINDIR)/mount.fuse.docfs \
              $(DESTDIR)$(BASHCOMPDIR)/docfs $(DESTDIR)$(ZSHCOMPDIR)/_docfs \
              $(DESTDIR)$(FISHCOMPDIR)/docfs.fish $(DESTDIR)$(MANDIR)/man1/docfs.1
SWIFT      ?= swift
STORE      ?= demo-store
MNT        ?= mnt
LAYOUT     ?= demo/layout.yaml
# Mounted tests create their mounts under this prefix: /tmp/docfs-test-<test pid>-<random>/mnt
TEST_PREFIX = /tmp/docfs-test-

RELEASE_BIN = $(CURDIR)/.build/release/docfs
FSBENCH     = ../shared/bench/fsbench
BENCH_ARGS ?=            # e.g. BENCH_ARGS='--only seq,small --peers native,passthrough_ll'
# fsbench runs this through sh -c with {src} a fresh empty directory; cp/untar remount the
# same {src}, so init only when it is still empty.
BENCH_FS    = docfs=[ -n "$$(ls -A {src})" ] || $(RELEASE_BIN) init {src}; $(RELEASE_BIN) mount {src} {mnt}
# BENCH_BASE=/path/to/an/older/docfs adds it as docfs-base: before/after ratios from one run.
BENCH_BASE ?=
BENCH_FSES  = --fs '$(BENCH_FS)' $(if $(BENCH_BASE),--fs 'docfs-base=[ -n "$$(ls -A {src})" ] || $(BENCH_BASE) init {src}; $(BENCH_BASE) mount {src} {mnt}')

.PHONY: all build deps run test test-main test-beside format format-check test-io-uring io-uring-pass test-io-uring-if-offered permissions replica-model model fuzz model-deps install uninstall generated clean-mounts bench bench-quick bench-scale bench-replicas clean microbench

all: build

build: deps
	$(SWIFT) build -c release

# Idempotent: does nothing when libfuse3 (headers + fusermount3), sqlite3 headers, the
# shared-mime-info database (content-type detection: /usr/share/mime), attr, rsync and liburing
# (headers, for FUSE over io_uring) and pgbouncer (the tests of replicas behind it, started by
# Tests/remote/servers.sh; policy-rc.d keeps the package from starting a pgbouncer of its own)
# are present.
# As root it installs what is missing; otherwise it stops at once with one line naming it.
deps:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	pkg-config --exists fuse3 2>/dev/null || missing="$$missing libfuse3-dev"; \
	[ -f /usr/include/liburing.h ] || missing="$$missing liburing-dev"; \
	command -v fusermount3 >/dev/null 2>&1 || missing="$$missing fuse3"; \
	[ -f /usr/include/sqlite3.h ] || missing="$$missing libsqlite3-dev"; \
	{ [ -f /usr/share/mime/globs2 ] && [ -f /usr/share/mime/magic ]; } || missing="$$missing shared-mime-info"; \
	{ command -v setfattr >/dev/null 2>&1 && command -v getfattr >/dev/null 2>&1; } || missing="$$missing attr"; \
	command -v rsync >/dev/null 2>&1 || missing="$$missing rsync"; \
	{ command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; } || missing="$$missing pgbouncer"; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u 2>/dev/null)" != 0 ]; then \
	    echo "make: missing system packages:$$missing (install them with: sudo apt-get install$$missing, or run sudo make deps)" >&2; \
	    exit 1; \
	fi; \
	echo "Installing$$missing ..."; \
	policy=""; \
	if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    policy=/usr/sbin/policy-rc.d; printf '#!/bin/sh\nexit 101\n' >"$$policy" && chmod 755 "$$policy"; \
	fi; \
	status=0; \
	{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; } || status=$$?; \
	[ -z "$$policy" ] || rm -f "$$policy"; \
	exit $$status

run: deps build
	@if [ ! -e "$(STORE)" ]; then \
	    echo "$(RELEASE_BIN) init $(STORE) --layout $(LAYOUT)"; \
	    "$(RELEASE_BIN)" init "$(STORE)" --layout "$(LAYOUT)" || exit 1; \
	fi
	@mkdir -p "$(MNT)"
	@if grep -qs " $$(cd "$(MNT)" && pwd -P) " /proc/self/mounts; then \
	    echo "$(MNT) is already mounted."; \
	else \
	    "$(RELEASE_BIN)" mount "$(STORE)" "$(MNT)" || exit 1; \
	fi
	@echo
	@echo "The demo store '$(STORE)' is mounted at $(MNT):"
	@echo "  Inbox     add PDFs and images; no edits in place"
	@echo "  Archive   read-only"
	@echo "  Projects  everything allowed"
	@echo
	@echo "Try:     cp some.pdf $(MNT)/Inbox/ && cp -r some-dir $(MNT)/Projects/ && ls -lR $(MNT)"
	@echo "Unmount: $(RELEASE_BIN) unmount $(MNT)     (or: fusermount3 -u $(MNT))"

test: deps clean-mounts
	@[ -c /dev/fuse ] || { echo "make test: /dev/fuse is missing; the mounted tests need FUSE" \
	    "(in a container: --device /dev/fuse --cap-add SYS_ADMIN)" >&2; exit 1; }
	$(MAKE) --no-print-directory format-check
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory generated CONFIGURATION=debug
	Tests/remote/servers.sh install
	Tests/beside.sh '$(MAKE) --no-print-directory test-beside' '$(MAKE) --no-print-directory test-main'

# `make test` after its build, in two streams (Tests/beside.sh): the XCTest passes in the
# foreground, the models and the permission matrix beside them (their output follows at the end).
# Each mostly waits on mounts, servers and fsync: side by side they take about the longer one's time.
test-main:
	Tests/remote/servers.sh run -- env DOCFS_BIN="$$($(SWIFT) build --show-bin-path)/docfs" DOCFS_GENERATED="$(GENERATED)" \
	    $(SWIFT) test --skip-build
	DOCFS_BIN="$$($(SWIFT) build --show-bin-path)/docfs" DOCFS_TEST_PROVIDER=memory \
	    $(SWIFT) test --skip-build --filter '$(MEMORY_TEST_FILTER)' --skip '$(MEMORY_TEST_SKIP)'
	$(MAKE) --no-print-directory test-io-uring-if-offered

test-beside:
	$(MAKE) --no-print-directory replica-model
	$(MAKE) --no-print-directory permissions
	$(MAKE) --no-print-directory model MODEL_PROFILE=ci
	$(MAKE) --no-print-directory model MODEL_PROFILE=ci MODEL_PROVIDER=memory MODEL_EXAMPLES=60

# The code's layout is .swift-format's (swift-format, in the toolchain): `make format` applies it,
# and `make test` checks it first, so a change that does not follow it fails in seconds.
FORMAT_PATHS = Package.swift Sources Tests Examples Plugins
format:
	$(SWIFT) format format --in-place --recursive --parallel $(FORMAT_PATHS)

format-check:
	$(SWIFT) format lint --strict --recursive --parallel $(FORMAT_PATHS)

# The mounted tests once more with every mount over FUSE over io_uring (`-o io_uring`,
# DOCFS_TEST_IO_URING=1 in MountFixture; off by default in docfs). The fuse module's enable_uring is set to Y for the run
# and put back as it was, pass or fail (as root; without the parameter the target says so and stops).
# Left out of the pass (IO_URING_TEST_SKIP): classes that put nothing through the ring that the
# others do not. The generated help, completions and man page (CitizenTestsGenerated) mount
# nothing; the layout's capabilities (RefusalTests, AdversarialCapabilityTests) are decided above
# the transport, and their refusals are errnos in replies to requests that ErrnoTests,
# BadInputTests and OwnershipMountTests send through the ring too. All three run over /dev/fuse.
IO_URING_PARAM = /sys/module/fuse/parameters/enable_uring
IO_URING_TEST_FILTER ?= DocFSMountTests
IO_URING_TEST_SKIP   ?= DocFSMountTests\.(CitizenTestsGenerated|RefusalTests|AdversarialCapabilityTests)/
test-io-uring: deps clean-mounts
	@[ -w $(IO_URING_PARAM) ] || { echo "make test-io-uring: $(IO_URING_PARAM) is missing or not writable" \
	    "(needs Linux 6.14+ with CONFIG_FUSE_IO_URING, as root)" >&2; exit 1; }
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory io-uring-pass

# The pass itself, on what is built (`make test` has just built it: no second build there).
io-uring-pass:
	@was=$$(cat $(IO_URING_PARAM)); trap 'echo "$$was" > $(IO_URING_PARAM)' EXIT; trap 'exit 130' INT TERM; \
	echo Y > $(IO_URING_PARAM); \
	DOCFS_BIN="$$($(SWIFT) build --show-bin-path)/docfs" DOCFS_GENERATED="$(GENERATED)" DOCFS_TEST_IO_URING=1 \
	    $(SWIFT) test --skip-build --filter '$(IO_URING_TEST_FILTER)' --skip '$(IO_URING_TEST_SKIP)'

# `make test`'s last pass: test-io-uring where the kernel has FUSE over io_uring and this user may
# turn it on (the parameter exists and is writable: root, sysfs writable), else one line saying
# why it is skipped. Without the pass, no mount of the suite would go through the ring: the
# parameter is N unless root sets it, and docfs falls back to /dev/fuse without it.
# All of DocFSMountTests but IO_URING_TEST_SKIP (three classes that send nothing through the
# ring the others do not): every way a request goes through the ring stays in it (passthrough,
# kill -9 and crashes of the daemon, unmounts, large I/O, hard links, permissions). It took 4.6
# minutes here (231 tests, CrashSafetyTests 73 s the longest, most of it waits that MountFixture
# no longer makes), on what `make test` built. It runs without the servers of
# Tests/remote/servers.sh, so the remote and metrics tests skip in this pass (they ran over
# /dev/fuse above).
test-io-uring-if-offered:
	@if [ -w $(IO_URING_PARAM) ]; then \
	    $(MAKE) --no-print-directory io-uring-pass; \
	elif [ -e $(IO_URING_PARAM) ]; then \
	    echo "make test: the io_uring pass is skipped: $(IO_URING_PARAM) is not writable (run as root to have it)"; \
	else \
	    echo "make test: the io_uring pass is skipped: this kernel has no FUSE over io_uring ($(IO_URING_PARAM) is missing; Linux 6.14+ with CONFIG_FUSE_IO_URING)"; \
	fi

# Two replicas of one tree, random operations on both while PostgreSQL is stopped, then the trees
# must converge with nothing lost (Tests/replicas/two_replicas.py); then three replicas online at
# once through fault proxies, files held open across the others' changes, PostgreSQL restarts,
# kill -9, cut connections, gc --grace 0 and a damaged pack, and every close() that returned 0
# kept (online_replicas.py).
# Against the servers of Tests/remote/servers.sh. REPLICA_MODEL_SEEDS sizes both (default 3 and
# 1 seeds); REPLICA_MODEL_PHASES / _OPS and ONLINE_MODEL_ROUNDS / _OPS the rest.
replica-model:
	Tests/remote/servers.sh run -- env DOCFS_BIN="$$($(SWIFT) build --show-bin-path)/docfs" \
	    PYTHONDONTWRITEBYTECODE=1 sh -c 'python3 Tests/replicas/two_replicas.py && python3 Tests/replicas/online_replicas.py'

# Owners and permissions against ext4 (Tests/permissions): the permission matrix (every user x
# item x operation, errno for errno, as other uids in forked children) and the copy tools
# (cp -a, tar xpf, rsync -a twice, install, touch -d) compared with a plain directory. As root.
permissions: model-deps
	DOCFS_BIN="$$($(SWIFT) build --show-bin-path)/docfs" \
	    PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -s -p no:cacheprovider Tests/permissions

# The mounted test classes that `make test` runs a second time against the in-memory provider
# (DOCFS_TEST_PROVIDER=memory: MountFixture mounts `memory:`). A test in them that mounts a second
# time is skipped from there on (nothing survives an unmount): in ConcurrencyTests,
# OwnershipMountTests, XattrMountTests, TrashOptionTests. Store-only, and why:
#   CrashSafetyTests, DurabilityTests      kill -9 / power-cut durability and `docfs check` of a store
#   CommandLineTests, CitizenTests(+Generated)  `docfs mount STORE` by hand (store lock, daemon mode),
#                                          mount(8)/fstab with store paths, new/--json of a store
#   RefusalTests, AdversarialCapabilityTests, ContentTypeMountTests, TrashMountTests, ImportCommandTests, HardLinkRulesMountTests
#                                          layouts (per-folder capabilities, content types) or `docfs import --store`
#   TruncateRaceTests and the two in MEMORY_TEST_SKIP  check the tree after `XCTAssertTrue(try fx.remount())`
#                                          (a skip thrown there counts as a failure), or corrupt/locked stores
#   RemoteMountTests, ReplicaMountTests, RemoteGCTests  a store that is a remote replica (`docfs init --remote`), against
#                                          the servers of Tests/remote/servers.sh (skipped without them)
MEMORY_TEST_CLASSES = ShellToolTests|HardLinkMountTests|HardLinkTrashMountTests|ErrnoTests|OpenUnlinkedTests|ConcurrencyTests|OwnershipMountTests|PrivilegeAttributeTests|XattrMountTests|TrashOptionTests|BadInputTests
MEMORY_TEST_FILTER  = DocFSMountTests\.($(MEMORY_TEST_CLASSES))/
MEMORY_TEST_SKIP    = OpenUnlinkedTests/testUnlinkedWhileOpenForWritingKeepsWorkingUntilClose|BadInputTests/testUnusableStoresGetAClearMessageAndNoDamage

# The model-based random test (Tests/model): the same random operations on a plain directory
# and on a docfs mount, trees and errnos compared. `make test` runs it seeded with a short
# budget (MODEL_PROFILE=ci, about a minute); `make fuzz` runs random seeds for longer
# (MODEL_EXAMPLES=N to change how many sequences). pytest's "no tests collected" (exit 5) fails.
# MODEL_PROVIDER=memory runs it against the in-memory provider (no remounts).
MODEL_PROFILE ?= ci
MODEL_PROVIDER ?= store
model: model-deps
	DOCFS_BIN="$$($(SWIFT) build --show-bin-path)/docfs" HYPOTHESIS_PROFILE=$(MODEL_PROFILE) MODEL_PROVIDER=$(MODEL_PROVIDER) \
	    PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -s -p no:cacheprovider Tests/model

fuzz:
	$(SWIFT) build
	$(MAKE) --no-print-directory model MODEL_PROFILE=fuzz

model-deps:
	@python3 -c 'import hypothesis, pytest' 2>/dev/null || { \
	    echo "Installing hypothesis and pytest for python3 ..."; \
	    python3 -m pip install --quiet hypothesis pytest; }

# Hot-path timings without a mount (the bridge's per-request work, the store's lookups and
# actions). Numbers depend on the machine: compare runs on one machine; never part of `make test`.
# A store of SCALE_ITEMS items (default 1,000,000) built through the store's API, mounted, and
# find / ls -lR / random stat / cp -r timed beside a native tree of the same shape, with the
# daemon's memory after each phase and docfs check's time and peak memory (bench/bench-scale.sh).
bench-scale: deps
	$(SWIFT) build -c release --product docfs
	$(SWIFT) build -c release --product docfs-scale
	BIN="$$($(SWIFT) build -c release --show-bin-path)" bash bench/bench-scale.sh

# Several replicas (bench/replica_bench.py): write on mount A -> readable on mount B (median, p99
# over BENCH_FILES=200 files) and `docfs init --remote` + `ls -lR` of a BENCH_ITEMS=100000-item
# tree, against the servers of Tests/remote/servers.sh.
bench-replicas: deps
	@command -v rclone >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y rclone >/dev/null; } || echo "rclone is missing: the comparisons are skipped"
	$(SWIFT) build -c release --product docfs
	$(SWIFT) build -c release --product docfs-scale
	Tests/remote/servers.sh run -- env DOCFS_BIN="$$($(SWIFT) build -c release --show-bin-path)/docfs" \
	    PYTHONDONTWRITEBYTECODE=1 python3 bench/replica_bench.py $(BENCH_REPLICAS)

microbench: deps
	$(SWIFT) build -c release --product docfs-microbench
	"$$($(SWIFT) build -c release --show-bin-path)/docfs-microbench"

# Completion scripts (ArgumentParser's --generate-completion-script) and the man page
# (ArgumentParser's generate-manual plugin) from the built binary, into .build/generated.
CONFIGURATION ?= release
generated:
	@bin="$$($(SWIFT) build -c $(CONFIGURATION) --show-bin-path)/docfs"; \
	[ -x "$$bin" ] || { echo "make generated: build docfs first ($$bin is missing)" >&2; exit 1; }; \
	mkdir -p "$(GENERATED)/completions" "$(GENERATED)/man" && \
	"$$bin" --generate-completion-script bash > "$(GENERATED)/completions/docfs.bash" && \
	"$$bin" --generate-completion-script zsh > "$(GENERATED)/completions/_docfs" && \
	"$$bin" --generate-completion-script fish > "$(GENERATED)/completions/docfs.fish"
	@rm -rf "$(CURDIR)/.build/plugins/GenerateManual/outputs/docfs"
	$(SWIFT) package plugin generate-manual --configuration $(CONFIGURATION) --authors "the docfs authors" >/dev/null
	@page=$$(find "$(CURDIR)/.build/plugins" -path '*GenerateManual*' -name docfs.1 | head -n 1); \
	[ -n "$$page" ] || { echo "make generated: the generate-manual plugin wrote no docfs.1" >&2; exit 1; }; \
	cp "$$page" "$(GENERATED)/man/docfs.1"

# mount.fuse.docfs is a link to docfs, which acts as the mount(8) helper under that name.
install: build
	$(MAKE) --no-print-directory generated CONFIGURATION=release
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(SBINDIR)" "$(DESTDIR)$(BASHCOMPDIR)" "$(DESTDIR)$(ZSHCOMPDIR)" \
	    "$(DESTDIR)$(FISHCOMPDIR)" "$(DESTDIR)$(MANDIR)/man1"
	install -m 0755 "$(RELEASE_BIN)" "$(DESTDIR)$(BINDIR)/docfs"
	ln -sfn "$(BINDIR)/docfs" "$(DESTDIR)$(SBINDIR)/mount.fuse.docfs"
	install -m 0644 "$(GENERATED)/completions/docfs.bash" "$(DESTDIR)$(BASHCOMPDIR)/docfs"
	install -m 0644 "$(GENERATED)/completions/_docfs" "$(DESTDIR)$(ZSHCOMPDIR)/_docfs"
	install -m 0644 "$(GENERATED)/completions/docfs.fish" "$(DESTDIR)$(FISHCOMPDIR)/docfs.fish"
	install -m 0644 "$(GENERATED)/man/docfs.1" "$(DESTDIR)$(MANDIR)/man1/docfs.1"

# Removes exactly what install put there (same PREFIX, DESTDIR, SBINDIR, ...).
uninstall:
	rm -f $(foreach f,$(INSTALLED),"$(f)")

# Lazily unmount test mounts left behind by test runs that no longer exist (the pid in the
# directory name is the test process that made it). Never kills processes by name: once
# unmounted, a leftover daemon's FUSE loop ends by itself.
clean-mounts:
	@awk '$$3 ~ /^fuse/ && index($$2, "$(TEST_PREFIX)") == 1 { print $$2 }' /proc/self/mounts | \
	while read -r m; do \
	    owner=$$(printf '%s\n' "$$m" | sed -n 's|^$(TEST_PREFIX)\([0-9][0-9]*\)-.*|\1|p'); \
	    if [ -n "$$owner" ] && kill -0 "$$owner" 2>/dev/null; then \
	        echo "clean-mounts: $$m belongs to running test process $$owner; leaving it"; \
	        continue; \
	    fi; \
	    echo "clean-mounts: fusermount3 -uz $$m"; \
	    fusermount3 -uz "$$m" || umount -l "$$m" || true; \
	done

bench: build
	$(FSBENCH) $(BENCH_ARGS) $(BENCH_FSES)

bench-quick: build
	$(FSBENCH) --quick $(BENCH_ARGS) $(BENCH_FSES)

clean:
	$(SWIFT) package clean
