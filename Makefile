# epochfs build and test entry points. Targets wrap scripts; CI calls `make ci`.
GO      ?= go
PATH    := $(PATH):/usr/local/go/bin
# The version: the last v0.x.y tag and the commits since (git describe), the
# commit, and the build date (SOURCE_DATE_EPOCH's when set, for a
# reproducible build; the man pages carry it too).
# A version a package manager orders: v0.3.0-5-gabc123-dirty is 0.3.0+5.gabc123.dirty.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null | sed 's/^v//; s/-\([0-9]*\)-g/+\1.g/; s/-dirty/.dirty/' || true)
ifeq ($(VERSION),)
VERSION := 0.0.0~git$(shell git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null).$(shell git rev-parse --short HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo .dirty)
endif
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell date +%s)
export SOURCE_DATE_EPOCH
BUILD_DATE := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)

.PHONY: build test ci vet lint tidy-check test-slurm demo bench bench-quick bench-deps fuzz deps clean chaos soak

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/epochfs ./cmd/epochfs

deps:
	bash scripts/install-deps.sh

# The manual (man8: epochfs and one page per command, mount.epochfs; man5:
# epochfs.toml) and the bash, zsh and fish completion, from the command tree.
.PHONY: man package docs-check test-package
man: build
	rm -rf build/man && bin/epochfs gen-docs --docs docs build/man

# dist/epochfs_VERSION_amd64.deb and dist/epochfs-VERSION.x86_64.rpm
# (packaging/nfpm.yaml).
package: build
	VERSION=$(VERSION) LDFLAGS="$(LDFLAGS)" GO=$(GO) bash scripts/package.sh

# The docs against the code: the README's command table and each command's
# help, the man pages (every command and flag, groff-clean), mount.epochfs(8)
# against the helper's options, docs/config.md against the config's keys.
docs-check: build
	$(GO) test -count=1 -run 'TestHelpMatchesTheReadme|TestManPages|TestMountHelperPage|TestCompletion|TestFlagsAsBefore' ./cmd/epochfs
	$(GO) test -count=1 -run 'TestConfigDocMatchesTheCode' ./internal/config

# The alert rules: promtool's checks and its unit tests of each alert
# (contrib/prometheus/epochfs.rules.test.yml). The rules against a real
# Prometheus scraping a live mount: test/mount/alerts_test.go.
.PHONY: test-alerts
test-alerts:
	promtool check rules contrib/prometheus/epochfs.rules.yml
	cd contrib/prometheus && promtool test rules epochfs.rules.test.yml

# The package as an admin meets it (test/package/run.sh; root, apt): built,
# linted, installed with apt, doctor, a mount from /etc/fstab through the
# installed helper, man and completion, purged.
test-package: package
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} unshare -m --propagation private bash test/package/run.sh

test: build
	$(GO) test ./...

vet:
	$(GO) vet ./...
	bash scripts/go-fuse-series.sh check
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

# go.mod and go.sum must be as `go mod tidy` leaves them.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }

# epochfs's prolog and epilog under a real one-node Slurm (test/slurm/run.sh;
# needs root and Debian's slurmctld, slurmd, slurm-client and munge).
test-slurm: build
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} bash test/slurm/run.sh bin/epochfs

# The mount suite over FUSE over io_uring, and the io_uring tests of the
# patched go-fuse (scripts/with-transport.sh turns the fuse module's
# enable_uring on for the run and sets it back). Needs root.
.PHONY: test-io-uring
test-io-uring: build
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} bash scripts/with-transport.sh io_uring sh -c '\
	  $(GO) test -race -count=1 -timeout 30m ./test/mount ./internal/fs && \
	  cd third_party/go-fuse && $(GO) test -race -count=1 -run IoUring ./fuse ./fs'

# go-fuse's tests after each patch of the series (third_party/go-fuse/patches):
# over /dev/fuse after each, and over io_uring too after the last. Needs root;
# about 5 minutes a tree.
.PHONY: test-go-fuse-series
test-go-fuse-series:
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} bash scripts/test-go-fuse.sh --series

# go-fuse's own tests in the patched copy, on both transports. Needs root.
.PHONY: test-go-fuse
test-go-fuse:
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} bash scripts/test-go-fuse.sh

# The tests the race detector changes (allocation counts: files built with
# !race), without it.
.PHONY: test-norace
test-norace:
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} $(GO) test -count=1 -run 'Allocat' ./internal/preprocess

# The CI suite: vet, a tidy go.mod, every test under the race detector, real
# FUSE mounts (over /dev/fuse, then the mount suite over io_uring), go-fuse's
# own tests, then the Slurm prolog and epilog under a real Slurm.
# staticcheck and deadcode, pinned (scripts/lint.sh).
lint:
	bash scripts/lint.sh

ci: deps build vet lint tidy-check docs-check test-alerts
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} bash scripts/with-transport.sh dev $(GO) test -race -count=1 -timeout 30m ./...
	$(MAKE) test-norace
	bash scripts/with-transport.sh dev $(MAKE) chaos DURATION=$${CHAOS_DURATION:-5m} SEED=$${CHAOS_SEED_DEV:-4}
	bash scripts/with-transport.sh io_uring $(MAKE) chaos DURATION=$${CHAOS_DURATION:-5m} SEED=$${CHAOS_SEED_URING:-7}
	$(MAKE) test-io-uring
	$(MAKE) test-go-fuse
	$(MAKE) test-package
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} bash test/slurm/run.sh bin/epochfs

# The differential fault harness (test/chaos, docs/benchmarks.md "Chaos";
# make ci runs fixed seeds, so that a red run replays: make chaos explores):
# random steps over a mount, its source and its tiers, checked against a
# model of the docs. SEED=N replays a run (a random one when empty: printed
# first); DURATION bounds it. soak: the same, longer, one seed after another,
# in JOBS runs side by side.
SEED     ?=
JOBS     ?= 1
DURATION ?= 2m
chaos:
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} $(GO) test -count=1 -timeout 0 -v -run '^TestChaos$$' ./test/chaos \
	  -chaos.duration=$(DURATION) -chaos.seed=$(if $(SEED),$(SEED),0)

soak:
	EPOCHFS_REQUIRE_FUSE=$${EPOCHFS_REQUIRE_FUSE:-1} bash scripts/soak.sh $(DURATION) $(JOBS)

# Mount a generated sample dataset, train two epochs over it, show the status.
demo: deps build
	bash scripts/demo.sh

# Benchmarks (docs/benchmarks.md): epochs over an emulated slow PFS against
# sshfs, rclone and a local copy, then read path and preprocessing. Needs
# root; ~60 min. bench-quick: a few minutes. Not part of CI (needs sshd).
bench-deps: deps
	bash test/bench/deps.sh

bench: bench-deps build
	bash test/bench/run.sh

bench-quick: bench-deps build
	QUICK=1 bash test/bench/run.sh

fuzz:
	bash scripts/fuzz.sh

clean:
	rm -rf bin

# Read path overhead of resident data: mount vs native reads of the tier
# (docs/benchmarks.md, "Read path overhead"). Needs root; ~5-10 minutes.
.PHONY: bench-readpath
bench-readpath: build
	bash test/bench/readpath.sh

# The mount while its source fails (docs/benchmarks.md, "Source faults"):
# resident reads with the source down or hung against the same reads with
# it up, and the time a read that needs a hung source takes to fail. Needs
# root, sshd and sshfs; ~5 minutes.
.PHONY: bench-faults
bench-faults: build
	$(GO) test -run '^$$' -bench SourceFaults -benchtime 1x -timeout 60m ./test/bench/faults

# Preprocessed views against torchvision DataLoaders (docs/benchmarks.md,
# "Preprocessed views"): three jobs through batch, one job from the decoded
# cache, view=encoded batches against native reads. Needs root and Debian's
# python3-torch/torchvision; ~20 minutes.
.PHONY: bench-views
bench-views: build
	bash test/bench/views/run.sh

# The DSI model against the mount (docs/benchmarks.md, "The model against
# the mount"): samples/s under several splits, two dataset sizes, one and
# three jobs, against the model's predictions from inputs profiled on this
# node; Pearson correlation and whether the model's split is within 5 % of
# the best. Needs root and Debian's python3-torch; ~30 minutes.
.PHONY: bench-model
bench-model: build
	bash test/bench/model/run.sh

# Many nodes, one PFS fetch (docs/benchmarks.md, "Many nodes: the cluster
# tier"): 3 epochfs mounts with a 3-master Redis Cluster against one node
# alone and 3 nodes without it, over the emulated slow PFS; PFS bytes,
# epoch-1 times, reads from the cluster against the DSI model's remote-cache
# prediction (SCENARIO=tier); datasets larger than a node, data = "peers"
# against data = "redis", no cluster and a dataset that fits, a training job
# over 3 nodes in network namespaces with capped links, and the peer read
# rate against the link (SCENARIO=peers, test/bench/cluster/peers.sh). Needs
# root, sshd, sshfs, redis-server, redis-tools, jq, python3-torch; ~20 + ~30
# minutes (QUICK=1: a few minutes each).
.PHONY: bench-cluster
bench-cluster: bench-deps build
	case "$${SCENARIO:-all}" in tier|all) bash test/bench/cluster/run.sh;; esac
	case "$${SCENARIO:-all}" in peers|all) bash test/bench/cluster/peers.sh;; esac

# The FUSE transport of resident data: a PyTorch training loop and 8 raw
# readers over a local copy, the mount and libfuse's passthrough_hp (with
# and without FUSE over io_uring), daemon CPU per sample and requests per
# sample by opcode (docs/benchmarks.md, "FUSE transport"). Needs root;
# builds passthrough_hp from ../shared/anchors; ~5 minutes.
.PHONY: bench-transport
bench-transport: bench-deps build
	bash test/bench/transport/run.sh

# The first minute and the first epoch over a latency-bound source
# (docs/benchmarks.md, "The first minute and the first epoch"): epoch 1 of
# small files over the mount against sshfs directly (1 ms each way), source
# requests per file, the next job's first epoch after a remount, ls -lR,
# RSS per copied file, mount and walk times against find. Needs root, sshd
# and sshfs; ~10 minutes (WALK_FILES="200000 1000000" for the large walk).
.PHONY: bench-firstepoch
bench-firstepoch: bench-deps build
	bash test/bench/firstepoch.sh

# Listings of many small files (docs/benchmarks.md, "Ten million files"):
# mount, walk, remount, RSS per file, and ls -R, find, os.walk and
# A refresh adding and removing files in one directory of 500,000
# (docs/benchmarks.md, "A refresh that adds files"). BASE=<binary> to
# compare. Needs root; ~5 minutes.
.PHONY: bench-refresh
bench-refresh: build
	bash test/bench/refresh.sh

# ImageFolder through the mount against the source and a local copy, on
# tmpfs and on the emulated PFS. FILES="1000000 10000000" for both sizes.
.PHONY: bench-listing
bench-listing: bench-deps build
	bash test/bench/listing.sh
