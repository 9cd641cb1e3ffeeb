# docfs — build, run a demo mount, test, benchmark.
#
#   make            build (release)
#   make run        install FUSE deps if missing, build, mount the demo store at ./mnt
#   make test       install FUSE deps if missing, build, run unit and mounted tests
#   make install    copy the release binary to $(PREFIX)/bin

PREFIX     ?= /usr/local
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

.PHONY: all build deps run test install clean-mounts bench bench-quick clean

all: build

build:
	$(SWIFT) build -c release

# Idempotent: does nothing when libfuse3 (headers + fusermount3), sqlite3 headers and the
# shared-mime-info database (content-type detection: /usr/share/mime) are present.
deps:
	@if pkg-config --exists fuse3 2>/dev/null && command -v fusermount3 >/dev/null 2>&1 \
	    && [ -f /usr/include/sqlite3.h ] && [ -f /usr/share/mime/globs2 ] && [ -f /usr/share/mime/magic ] \
	    && command -v setfattr >/dev/null 2>&1 && command -v getfattr >/dev/null 2>&1; then \
	    exit 0; \
	fi; \
	if [ "$$(id -u)" != 0 ]; then \
	    echo "make deps: libfuse3-dev, fuse3, pkg-config, libsqlite3-dev, attr or shared-mime-info is missing;" >&2; \
	    echo "           run 'sudo make deps' (or the same target with sudo) to install them." >&2; \
	    exit 1; \
	fi; \
	echo "Installing libfuse3-dev fuse3 pkg-config libsqlite3-dev attr shared-mime-info ..."; \
	apt-get update && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y libfuse3-dev fuse3 pkg-config libsqlite3-dev attr shared-mime-info

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
	$(SWIFT) build --build-tests
	DOCFS_BIN="$$($(SWIFT) build --show-bin-path)/docfs" $(SWIFT) test --skip-build

install: build
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 "$(RELEASE_BIN)" "$(DESTDIR)$(PREFIX)/bin/docfs"

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
	$(FSBENCH) $(BENCH_ARGS) --fs '$(BENCH_FS)'

bench-quick: build
	$(FSBENCH) --quick $(BENCH_ARGS) --fs '$(BENCH_FS)'

clean:
	$(SWIFT) package clean
