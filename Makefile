# refuel: `make run` starts the embedded stack and a demo; `make test` runs every test.
GO      ?= go
BIN     := bin
DATA    ?= .refuel
TRACES  ?= ../shared/traces
# The token machines join `make run`'s base group with: the token_file of
# examples/pools-joined.yaml.
JOIN_TOKEN := .refuel/join-token

.PHONY: build run test lint unit fuzz e2e e2e-packages python3-torch postgresql bench traces bench-policy bench-skynomad bench-estimate bench-autoscale bench-scale bench-pool bench-serve clean

build:
	@echo "building bin/worker, bin/starter and bin/refuel-bench (the first build compiles the Temporal server: a few minutes)"
	$(GO) build -o $(BIN)/ ./worker ./starter
	$(GO) build -o $(BIN)/refuel-bench ./bench

# Starts the control plane (embedded Temporal server, Web UI, local cloud,
# metrics) in the background, logging to $(DATA)/worker.log, then two
# machines that join its base group (`worker join`, each with a directory
# of its own, as on two servers), then drives the demo in the foreground.
# Ctrl-C stops everything in order: the machines drain and leave while
# the stack they report to still serves, then the stack stops. They run
# in sessions of their own (setsid), so the terminal's Ctrl-C reaches
# only this recipe, whose trap stops them one after the other (a second
# Ctrl-C does not cut that short and leave them running).
# CLOUDS=aws,gce runs the demo on simulated public clouds instead, all of
# them one market: the sim serves each cloud's API (EC2's on :4566,
# Compute Engine's on :8085) and runs acquire across both, without the
# pool and its base machines; the demo (--clouds) keeps its critical run
# to the first cloud named, on-demand, so each cloud carries work, and
# takes spot back on each cloud that holds a spot run.
CLOUDS ?=

run: build
ifneq ($(CLOUDS),)
	@mkdir -p $(DATA)
	@echo "starting refuel on simulated $(CLOUDS) (logs: $(DATA)/worker.log)"
	@$(BIN)/worker --data-dir $(DATA) --provider $(CLOUDS) $(if $(findstring aws,$(CLOUDS)),--ec2-sim 127.0.0.1:4566) $(if $(findstring gce,$(CLOUDS)),--gce-sim 127.0.0.1:8085) > $(DATA)/worker.log 2>&1 & wpid=$$!; \
	trap 'kill $$wpid 2>/dev/null; wait $$wpid 2>/dev/null' EXIT; trap 'exit 130' INT TERM HUP; \
	$(BIN)/starter demo --clouds $(CLOUDS) || { tail -20 $(DATA)/worker.log; exit 1; }; \
	echo "Web UI: http://127.0.0.1:8233  metrics: http://127.0.0.1:9464/metrics  (Ctrl-C to stop)"; \
	wait $$wpid
else
	@mkdir -p $(DATA)/machines
	@mkdir -p $(dir $(JOIN_TOKEN)); [ -s $(JOIN_TOKEN) ] || { umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > $(JOIN_TOKEN); }
	@rm -f $(DATA)/machines/*.ready
	@echo "starting refuel (logs: $(DATA)/worker.log; the base machines': $(DATA)/machines/*.log)"
	@alone=$$(command -v setsid); \
	$$alone $(BIN)/worker --data-dir $(DATA) --pools examples/pools-joined.yaml > $(DATA)/worker.log 2>&1 & wpid=$$!; \
	stop() { trap - EXIT; trap '' INT TERM HUP; echo "stopping: the base machines leave, then the stack"; \
		[ -z "$$jpids" ] || { kill $$jpids 2>/dev/null; wait $$jpids 2>/dev/null; }; kill $$wpid 2>/dev/null; wait $$wpid 2>/dev/null; }; \
	trap stop EXIT; trap 'stop; exit 130' INT TERM HUP; \
	for i in $$(seq 120); do $(BIN)/starter pool > /dev/null 2>&1 && break; sleep 1; done; \
	for m in dc-1 dc-2; do \
		$$alone $(BIN)/worker join --name $$m --gpus 1 --instance-type p3.2xlarge --zone dc-1 --price-per-hour 1.20 \
			--token-file $(JOIN_TOKEN) --dir $(DATA)/machines/$$m --ready-file $(DATA)/machines/$$m.ready \
			--checkpoint-url file://$(abspath $(DATA))/checkpoints > $(DATA)/machines/$$m.log 2>&1 & jpids="$$jpids $$!"; \
	done; \
	for i in $$(seq 60); do [ -f $(DATA)/machines/dc-1.ready ] && [ -f $(DATA)/machines/dc-2.ready ] && break; sleep 1; done; \
	$(BIN)/starter nodes; \
	$(BIN)/starter demo || { tail -20 $(DATA)/worker.log; exit 1; }; \
	echo "Web UI: http://127.0.0.1:8233  metrics: http://127.0.0.1:9464/metrics  (Ctrl-C to stop)"; \
	wait $$wpid
endif

# The end-to-end tests' Debian packages install in the background while
# the Go build (minutes from nothing) runs, so their download costs no
# time of its own; the end-to-end tests wait for them. An install is never
# cut short: a failed lint still waits for it to finish.
test:
	@mkdir -p $(BIN); \
	$(MAKE) --no-print-directory e2e-packages > $(BIN)/e2e-packages.log 2>&1 & pkgs=$$!; \
	$(MAKE) --no-print-directory lint unit fuzz; rc=$$?; \
	wait $$pkgs; cat $(BIN)/e2e-packages.log; \
	[ $$rc -eq 0 ] && $(MAKE) --no-print-directory e2e

e2e-packages: python3-torch postgresql

# go vet's analyzers through internal/vet, which computes no facts for
# third-party dependencies: go vet type-checks each of some two thousand
# from source for them (internal/vet/main.go says what that leaves out).
# `go vet ./...` itself stays clean too.
lint:
	@echo "== go vet (its analyzers, through internal/vet), gofmt, workflowcheck"
	$(GO) build -o $(BIN)/vet ./internal/vet
	$(GO) vet -vettool=$(abspath $(BIN)/vet) ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) tool workflowcheck ./workflows/...

# Test binaries are linked without their symbol table and DWARF: no test
# reads either (tracebacks come from the pclntab, which stays), and the
# suite links some eighty binaries, each in about half the time (13.6 s
# to 6.1 s for activities' here).
TESTLINK := -ldflags='-s -w'

# Unit tests: everything but tests/, which links the Temporal server.
# lint has vetted every package, so the tests do not vet them again.
unit:
	@echo "== unit tests"
	$(GO) test $(TESTLINK) -count=1 -vet=off $$($(GO) list ./... | grep -v /tests)

# Fuzz tests of what clients send: each target runs FUZZTIME on top of its
# seed corpus in testdata/fuzz/ (a crash found is written there). Budgets
# are counts of inputs, not durations: Go 1.26's fuzzer can report a bare
# "context deadline exceeded" when a duration ends while a worker is busy
# (go.dev/issue/75804, fixed in 1.27), and a count has no deadline to race.
# The EC2 query target runs some thousands of inputs a second, the parsers
# some ten thousand: each budget is a few seconds here. The EC2 target
# lives in a package of its own so its build does not instrument the AWS
# SDK's EC2 client, which the endpoint's other tests link.
FUZZTIME ?= 50000x
FUZZTIME_EC2 ?= 10000x
fuzz:
	@echo "== fuzz tests, $(FUZZTIME) inputs each ($(FUZZTIME_EC2) for the EC2 query)"
	$(GO) test $(TESTLINK) -run '^$$' -fuzz '^FuzzParseJobSpec$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./pkg/spec
	$(GO) test $(TESTLINK) -run '^$$' -fuzz '^FuzzParseServiceSpec$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./pkg/spec
	$(GO) test $(TESTLINK) -run '^$$' -fuzz '^FuzzParseDevSpec$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./pkg/spec
	$(GO) test $(TESTLINK) -run '^$$' -fuzz '^FuzzParsePools$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./pkg/pool
	$(GO) test $(TESTLINK) -run '^$$' -fuzz '^FuzzQuery$$' -fuzztime $(FUZZTIME_EC2) -fuzzminimizetime 100x ./pkg/cloud/sim/ec2api/fuzz

# End-to-end tests on the embedded server, with real node-agent processes.
# They mostly wait, so E2E_PARALLEL of them run at once, the longest
# first (tests/parallel_test.go); Go's own -parallel is above the number
# of tests so that the suite's gate chooses.
E2E_PARALLEL ?= 6
e2e: python3-torch postgresql
	@echo "== end-to-end tests (the first build links the Temporal server: a few minutes)"
	REFUEL_E2E_PARALLEL=$(E2E_PARALLEL) $(GO) test $(TESTLINK) -count=1 -vet=off -timeout 20m -parallel 64 ./tests/

# The PyTorch drill's trainer runs on Debian's torch (/usr/bin/python3; a
# pyenv python3 on PATH does not see it). Where it cannot be installed the
# test says so and skips.
python3-torch:
	@/usr/bin/python3 -c 'import torch' 2>/dev/null || { \
		echo "== installing python3-torch for the PyTorch drill (apt-get, as root)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch; } || \
		echo "python3-torch could not be installed: TestPyTorchDrill will skip"; }

# TestClusterFaultsSpareHealthyAttempts runs the Temporal server on
# Debian's PostgreSQL (a cluster of its own in a temporary directory, as
# the postgres user when run as root). Where it cannot be installed the
# test says so and skips.
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		echo "== installing postgresql for the cluster fault test (apt-get, as root)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; } || \
		echo "postgresql could not be installed: TestClusterFaultsSpareHealthyAttempts will skip"; }

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./pkg/...
	$(GO) test -run '^$$' -bench IdleVirtualInstance -benchtime 200x ./tests/

# The benchmarks' traces (availability/, preemption/, inference/) are not
# in the repository: TRACES names where they are. The built-in market's
# traces (pkg/cloud/sim/traces) are enough for starter sim and sim-bench.
traces:
	@test -d $(TRACES)/availability || { echo "make: no traces in TRACES=$(TRACES): give the directory holding availability/, preemption/ and inference/ (make bench-policy TRACES=DIR), or run bin/starter sim-bench --traces pkg/cloud/sim/traces/aws-10-26-2022 on the traces built into refuel"; exit 2; }

# Market policies over every availability trace: 48h of work, 52h and 70h
# deadlines, 3 start offsets per trace spread from its start to its end,
# and the zones of each day at their own prices across regions; then the
# same over the preemption traces, refuel's hold-out (never tuned on),
# across priced regions, the 32 s traces at 192 s ticks (a tick in stock
# where stock lasted through it: the optimum across priced regions at 32 s
# ticks takes tens of minutes); then both again for a gang of 4 nodes, over 2
# windows. Every table's replays share the cores in one process. Peers:
# greedy, uniform-progress and SkyNomad. Under 5 minutes on two cores.
# FULL=1 replays the full set: 10 windows (4 for the gang) and refuel's
# bound when each window's statistics are known in advance.
FULL ?=
bench-policy: traces
	$(GO) build -o $(BIN)/sim-bench-starter ./starter
	$(BIN)/sim-bench-starter sim-bench --traces $(TRACES)/availability,$(TRACES)/preemption --nodes 1,4 $(if $(FULL),--full)

# SkyNomad's own benchmark: every point of its authors' Figures 10a
# (deadline tightness over six regions) and 10b (1 to 13 regions at D/W
# 1.2) on their trace with their job, refuel and its peers beside the
# authors' published SkyNomad and optimum, and refuel again with each
# window's own statistics known in advance. Under 5 minutes on two cores.
bench-skynomad: traces
	$(GO) build -o $(BIN)/sim-bench-starter ./starter
	$(BIN)/sim-bench-starter sim-bench --skynomad $(TRACES)/availability/16-node/gcp-10-04-2025 --known-statistics

# Estimates against the runs they estimate (`starter estimate`): a 48 h
# deadline run estimated at 6 start times per trace (and per zones of one
# folder together) and per deadline (52 h, 70 h), from the market memory a
# deployment would have had then (each zone's trace before the start, at
# least 3 days of it), then replayed from that start under refuel's policy.
# It reports how often the run's cost fell within the estimate's p10..p90
# (target 80% ± 10) and the p50's mean error (target within 15%). The
# estimate was tuned on availability/; preemption/ is its hold-out. A few
# minutes each on two cores.
bench-estimate: traces
	$(GO) build -o $(BIN)/estimate-bench-starter ./starter
	$(BIN)/estimate-bench-starter estimate-bench --traces $(TRACES)/availability
	$(BIN)/estimate-bench-starter estimate-bench --traces $(TRACES)/preemption

# Inference autoscaling on a real hour of LLM traffic, a day composed
# from it and a family of seeded shapes (diurnal, flash crowd, heavy-tailed
# bursts, slow ramp, on/off, the hour at other rates), each at seeds 1 to
# 10: requests within the SLO, p99 time to first token and cost of
# refuel, a SkyServe-like reactive autoscaler, static peak provisioning
# and an oracle, all with the same start-up paths and prices, with each
# one's worst rows. refuel is tuned on seeds 1 to 5 without the real hour;
# seeds 6 to 10 and the real hour print apart as its hold-out. SEED sets
# the first seed, SEEDS how many; a few minutes on two cores.
SEED ?= 1
SEEDS ?= 10
bench-autoscale: traces
	$(GO) run ./starter autoscale-bench --trace $(TRACES)/inference/azure-llm-conv-2023-11-16.csv --seed $(SEED) --seeds $(SEEDS)

# A thousand training runs on one worker (virtual instances on the sim
# cloud, its own embedded stack and data dir): the server's raw rate, the
# requests a running job costs, a storm preempting 30% of the runs at
# once, recovery times, and nothing lost or leaked; BUSY cores (default
# 1) kept busy beside it, as on a shared machine. RUNS=N to scale it.
RUNS ?= 1000
BUSY ?= 1
# The balancer in front of demo model servers on loopback against one replica
# directly: the latency it adds (p50, p99) and the highest rate it sustains
# with 0 errors (targets on 2 cores: 1 ms, 5 ms, 5,000 requests/s).
bench-serve:
	$(GO) run ./starter serve-bench --replicas 3 --qps 1000 --for 5s

bench-scale:
	$(GO) run ./bench scale --runs $(RUNS) --storm 0.3 --busy-cores $(BUSY) --json

# The capacity pool on the embedded server: request, priority and release
# signals absorbed per second with 1,000 and 5,000 requests, the carry it
# hands on, its history per generation.
bench-pool:
	$(GO) test -run '^$$' -bench BenchmarkPoolSignals -benchtime 1x -timeout 60m ./tests/

clean:
	rm -rf $(BIN)
