# The partner payments API. `make run` starts the sandbox stack locally;
# `make test` is what CI runs.
SHELL := /bin/bash
MODULES := pkg testkit clients/go services/gateway services/payout services/fiat services/consent services/orders services/sandboxbank services/testnet devstack
SERVICES := $(notdir $(wildcard services/*))
BIN := bin
# How many go test processes make test runs devstack/e2e's tests in.
E2E_SHARDS ?= 2
GO ?= go
# Stamped into every binary's partnerapi_build_info and start line.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/partnerpay/api/pkg/obs.Version=$(VERSION) -X github.com/partnerpay/api/pkg/obs.Revision=$(REVISION)

.PHONY: build test test-all later deploy-check run bench lint fmt clean key dashboards fuzz env generate images loadtest schema contracts contracts-check sim sim-bugs

# Each service builds with GOWORK=off from its own go.mod, as the Dockerfile
# builds it; make test builds them so a go.sum that lags pkg fails here.
build:
	@mkdir -p $(BIN)
	@for s in $(SERVICES); do \
		(cd services/$$s && CGO_ENABLED=0 GOWORK=off $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o ../../$(BIN)/$$s ./cmd/$$s) || exit 1; \
	done
	@(cd devstack && $(GO) build -trimpath -o ../$(BIN)/devstack ./cmd/devstack)

# The end-to-end tests whose outcome rests on Redis (quote offers and
# their tombstones, payouts executed from them, rate buckets, Redis killed
# or frozen): the Cluster pass runs these; the rest touch Redis only
# through the gateway's limiter, which these cover.
CLUSTER_TESTS := TestQuote|TestQuoteTTLIsConfigurable|TestDepositQuote|TestExpiredQuoteIsRefusedNeverRepriced|TestPayoutExecution|\
	TestASecondIdenticalPayoutIsNotMergedIntoTheFirst|TestConcurrentExecutionsWithMixedBeneficiaries|TestAnAcknowledgedPayoutOutlivesKill9OfRedis|\
	TestIdempotencyOfExecution|TestEveryRailCanBePaidAndLands|TestAGeneratedClientCompletesThePayout|TestPayoutsAreListedThroughTheClientsIterator|\
	TestRateLimitPerKey|TestTwoGatewaysShareOneBucketPerKey|TestRedisKilledOrFrozenUnderLoad|TestChecksInContractOrder|\
	TestValidateBeforeAnyoneDeposits
empty :=
space := $(empty) $(empty)

# Every module, with the race detector. The end-to-end tests build the
# binaries themselves and start them with a real redis-server; the browser
# tests use Debian's chromium. The last line says how long it all took.
test:
	@start=$$(date +%s); MAKE_TEST_START=$$start $(MAKE) --no-print-directory test-all; status=$$?; \
		echo "== make test: $$(( $$(date +%s) - start )) s wall time$$( [ $$status -eq 0 ] || echo ", FAILED" )"; exit $$status

# at is how far make test is, for each stage's line.
at = [$$(( $$(date +%s) - $${MAKE_TEST_START:-$$(date +%s)} )) s]

# After every module's tests, the end-to-end tests (mostly waiting on their
# stacks: blocks, polls, leases) run in E2E_SHARDS processes, and beside
# them the benchmarks' single iterations and the simulation, into a log
# printed whole once all are done. The Redis Cluster pass runs after the
# shards, on its own: its rate-limit tests count what a key is admitted,
# and beside the simulation's load Redis was now and then slower than the
# limiter's deadline, and the fallback's burst admitted more. It fails if
# any part did.
test-all: lint contracts-check deploy-check build
	@echo "== $(at) devstack/e2e's real-Prometheus pages test starts, beside everything below (it mostly waits for alerts)"
	@rm -f $(BIN)/e2e-pages.status $(BIN)/later.status; \
	(cd devstack && $(GO) test -race -count=1 -timeout 20m -run '^TestPagesArriveWithinMinutes$$' ./e2e/ > ../$(BIN)/e2e-pages.log 2>&1; \
		echo $$? > ../$(BIN)/e2e-pages.status) & \
	echo "== $(at) every module's tests, in one run (go test spreads the packages of all modules over the cores)"; \
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list $(foreach m,$(MODULES),./$(m)/...) | grep -v '/devstack/e2e$$') || { wait; exit 1; }; \
	echo "== $(at) devstack/e2e in $(E2E_SHARDS) processes, and beside them the benchmarks and the simulation"; \
	($(MAKE) --no-print-directory later > $(BIN)/later.log 2>&1; echo $$? > $(BIN)/later.status) & \
	GO=$(GO) devstack/e2e-shards.sh $(E2E_SHARDS); shards=$$?; \
	echo "== $(at) devstack/e2e against a 3-master Redis Cluster (the tests of what Redis holds)"; \
	(cd devstack && E2E_REDIS=cluster $(GO) test -race -count=1 -timeout 15m -run '^($(subst $(space),,$(CLUSTER_TESTS)))$$' ./e2e/); cluster=$$?; \
	wait; echo "== devstack/e2e: the pages test"; cat $(BIN)/e2e-pages.log; \
	cat $(BIN)/later.log; \
	test $$shards -eq 0 -a $$cluster -eq 0 -a "$$(cat $(BIN)/e2e-pages.status)" = 0 -a "$$(cat $(BIN)/later.status)" = 0

# The benchmarks' single iterations, then make sim and make sim-bugs.
later:
	@echo "== $(at) the benchmarks of make bench run (one iteration each)"
	@set -o pipefail; cd services/gateway && $(GO) test -run '^$$' -bench . -benchtime 1x ./internal/edge/ ./internal/ratelimit/ | grep -v '^Benchmark'
	@set -o pipefail; cd services/payout && $(GO) test -run '^$$' -bench . -benchtime 1x ./internal/payout/ | grep -v '^Benchmark'
	@echo "== $(at) the simulation: make sim's seeds pass, and make sim-bugs catches every planted fault"
	@$(MAKE) --no-print-directory sim
	@$(MAKE) --no-print-directory sim-bugs

# The deployment files: docker-compose.yml validates, the trace collector's
# config passes the collector's own validate (a build of exactly the
# components compose's image runs, tools/otelcol), the Prometheus config
# and alert rules check, every alert's unit tests pass, Alertmanager's
# routing checks, and the Helm chart
# lints for both values files (devstack/deploycheck renders and decodes it).
deploy-check:
	@echo "== deploy"
	@out=$$(INTERNAL_TOKEN=x QUOTE_SECRET=x CONSENT_SECRET=x ORDERS_SECRET=x BANK_PROVIDER_KEY=x POSTGRES_PASSWORD=x GRAFANA_ADMIN_PASSWORD=x DEPOSIT_XPUB=x VERSION=v-check REVISION=r-check docker-compose config) || exit 1; \
		test "$$(echo "$$out" | grep -c 'REVISION: r-check')" -ge 7 || { echo "docker-compose.yml: an image is built without REVISION"; exit 1; }; \
		test "$$(echo "$$out" | grep -c 'GOMEMLIMIT: 230MiB')" -eq 7 || { echo "docker-compose.yml: a service runs without GOMEMLIMIT"; exit 1; }; \
		test "$$(echo "$$out" | grep -c "GOGC: '400'")" -eq 7 || { echo "docker-compose.yml: a service runs without GOGC 400"; exit 1; }; \
		test "$$(echo "$$out" | grep -c 'DATABASE_URL: postgres://partnerapi:x@postgres:5432/partnerapi')" -eq 4 || { echo "docker-compose.yml: payout, fiat, consent and orders must keep their records in PostgreSQL"; exit 1; }; \
		echo "docker-compose.yml: valid"
	@if docker-compose config -q 2>/dev/null </dev/null && [ ! -f .env ]; then echo "docker-compose.yml must refuse to start without its secrets"; exit 1; fi
	@pager="--set alertmanager.receivers.page.webhook_configs[0].url=https://pager.example --set alertmanager.receivers.watchdog.webhook_configs[0].url=https://deadman.example"; \
	for v in sandbox production; do \
		out=$$(helm lint deploy/helm/partner-api -f deploy/helm/partner-api/values-$$v.yaml --set image.tag=v-check --set chain.depositXPub=xpub-check $$pager 2>&1) || { echo "$$out"; exit 1; }; \
		echo "helm chart, values-$$v.yaml: $$(echo "$$out" | tail -1)"; \
	done; \
	if helm template pa deploy/helm/partner-api -f deploy/helm/partner-api/values-production.yaml --set image.tag=v-check >/dev/null 2>&1; then \
		echo "helm chart: a production release without a pager rendered"; exit 1; fi; \
	echo "helm chart: production refuses to render without alertmanager.receivers.page and .watchdog"
	@(cd tools/otelcol && GOWORK=off $(GO) run . validate --config=../../deploy/otel/collector.yaml) \
		&& echo "deploy/otel/collector.yaml: valid (the collector's own validate, v0.165.0, tools/otelcol)"
	@promtool check config --syntax-only deploy/prometheus/prometheus.yml
	@promtool check rules deploy/prometheus/rules/*.yml
	@deploy/prometheus/test-rules.sh
	@amtool check-config deploy/alertmanager/alertmanager.yml >/dev/null && echo "alertmanager.yml: valid"
	@for t in page:severity=page,alertname=UpstreamDown ticket:severity=ticket,alertname=GatewayUpstreamErrors \
		watchdog:severity=none,alertname=Watchdog ticket:alertname=SomethingNew; do \
		IFS=: read -r want labels <<< "$$t"; \
		amtool config routes test --config.file=deploy/alertmanager/alertmanager.yml --verify.receivers=$$want $${labels//,/ } >/dev/null 2>&1 \
			|| { echo "alertmanager.yml: $$labels does not reach $$want"; exit 1; }; \
	done

run: build
	@$(BIN)/devstack

bench:
	@cd services/gateway && $(GO) test -run '^$$' -bench . -benchmem ./internal/edge/ ./internal/ratelimit/
	@cd services/payout && $(GO) test -run '^$$' -bench . -benchmem ./internal/payout/

# The gateway against a bare pooled proxy and Caddy, on the same real payout
# service, with wrk (see devstack/cmd/loadtest). Not part of make test; it
# takes about (rounds x 16 x duration). LOADTEST_FLAGS="-rounds 3 -duration 3s".
LOADTEST_FLAGS ?=
loadtest: build
	@cd devstack && $(GO) build -o ../$(BIN)/loadtest ./cmd/loadtest
	@$(BIN)/loadtest -bin $(BIN) $(LOADTEST_FLAGS)

# The fuzz targets of every decoder that reads client bytes, as
# module:package:target. make test runs their seed corpora; make fuzz runs
# each for FUZZTIME.
FUZZTIME ?= 60s
FUZZ_TARGETS := pkg:./jsonbody:FuzzBytes pkg:./feedwire:FuzzParse pkg:./iban:FuzzValidate pkg:./format:FuzzIDs pkg:./format:FuzzEVMAddress \
	services/gateway:./internal/apikey:FuzzFromAuthorization services/gateway:./internal/apikey:FuzzParse \
	services/gateway:./internal/edge:FuzzRequestID services/gateway:./internal/edge:FuzzSplice \
	services/gateway:./internal/edge:FuzzOutboundHeader services/payout:./internal/quote:FuzzParse

# The seeded simulation of the payout's life (docs/architecture.md, "The
# simulation"): SEEDS seeds (1..12 unless set) of SIM_STEPS steps each
# (500 unless set), or one seed to replay a failure: make sim SEED=7.
SEEDS ?= 12
sim:
	@cd services/payout && SIM_SEED=$(SEED) SIM_SEEDS=$(SEEDS) SIM_STEPS=$(SIM_STEPS) \
		$(GO) test -count=1 -timeout 60m -run '^TestSimulation$$' -v ./internal/payout/ 2>&1 | grep -v '^=== \(RUN\|PAUSE\|CONT\|NAME\)'; \
		exit $${PIPESTATUS[0]}

# The simulation must catch every fault a simbug build plants
# (services/payout/internal/simbug): each within make sim's seeds
# (SIMBUG_SEEDS of SIMBUG_STEPS steps), tried one after the other until one
# catches it; the target fails when one goes unnoticed.
SIMBUG_FAULTS := handover-abandoned refund-apart row-error-swallowed confirmations-ignored
SIMBUG_SEEDS ?= $(SEEDS)
SIMBUG_STEPS ?= 500
sim-bugs:
	@mkdir -p $(BIN) && cd services/payout && $(GO) test -tags simbug -c -o $(CURDIR)/$(BIN)/payout-simbug.test ./internal/payout/ || exit 1; \
	for f in $(SIMBUG_FAULTS); do \
		caught=""; \
		for seed in $$(seq 1 $(SIMBUG_SEEDS)); do \
			out=$$(cd internal/payout && SIMBUG=$$f SIM_SEED=$$seed SIM_STEPS=$(SIMBUG_STEPS) $(CURDIR)/$(BIN)/payout-simbug.test \
				-test.count=1 -test.timeout 10m -test.run '^TestSimulation$$' 2>&1) && continue; \
			caught=$$(printf '%s\n' "$$out" | grep -m1 -oE 'seed [0-9]+: (after step [0-9]+|quiescence)'); \
			if [ -z "$$caught" ]; then printf '%s\n' "$$out" | tail -20; echo "sim-bugs: $$f, seed $$seed: the run failed, not a check"; exit 1; fi; \
			break; \
		done; \
		if [ -z "$$caught" ]; then echo "sim-bugs: $$f went unnoticed in $(SIMBUG_SEEDS) seeds of $(SIMBUG_STEPS) steps"; exit 1; fi; \
		echo "sim-bugs: $$f caught ($$caught)"; \
	done

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		IFS=: read -r mod pkg fn <<< "$$t"; \
		echo "== $$mod $$pkg $$fn ($(FUZZTIME))"; \
		(cd $$mod && $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg 2>&1 | tail -3) || exit 1; \
	done

# The local testnet's token (testkit/chaintest/contracts): TestToken.sol
# compiled with npm's solc (the version package.json pins); CI checks the
# committed bytecode is what it makes.
CONTRACTS := testkit/chaintest/contracts
contracts:
	@cd $(CONTRACTS) && npm ci --no-audit --no-fund --silent && node compile.js

contracts-check:
	@cd $(CONTRACTS) && npm ci --no-audit --no-fund --silent && node compile.js --check

lint:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@# One run over every module's packages (the workspace): the packages
	@# they share are analysed once, not once a module.
	@pkgs=$$($(GO) list $(foreach m,$(MODULES),./$(m)/...)) || exit 1; \
	$(GO) vet $$pkgs || exit 1; \
	if command -v staticcheck >/dev/null 2>&1; then staticcheck $$pkgs || exit 1; \
	else echo "staticcheck not installed (go install honnef.co/go/tools/cmd/staticcheck@latest); skipped"; fi

fmt:
	@gofmt -w $(MODULES)

# One image per service, stamped with the version and revision
# (partnerapi_build_info): partnerapi/<service>:$(VERSION).
IMAGE_PREFIX ?= partnerapi
images:
	@for s in $(SERVICES); do \
		docker build --build-arg SERVICE=$$s --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
			-t $(IMAGE_PREFIX)/$$s:$(VERSION) . || exit 1; \
	done
	@echo "images tagged $(VERSION): helm install … --set image.tag=$(VERSION)"

# Regenerate what is made from the OpenAPI document: the JSON form and the
# reference page the gateway embeds, and the Go client (clients/go, with
# oapi-codegen pinned in devstack/go.mod); tests fail when they differ.
generate:
	@cd services/gateway/internal/apidocs && $(GO) generate .
	@cd devstack && $(GO) tool oapi-codegen -config ../clients/go/oapi-codegen.yaml \
		-o ../clients/go/partnerapi.gen.go ../services/gateway/internal/apidocs/openapi.yaml

# Regenerate each database service's schema.sql from its migrations (a
# test holds the file to them; make test fails when they differ).
DATABASE_SERVICES := payout fiat consent orders
schema:
	@for s in $(DATABASE_SERVICES); do \
		(cd services/$$s && UPDATE_SCHEMA=1 $(GO) test -count=1 -run '^TestTheSchemaFileIsWhatTheMigrationsMake$$' ./internal/$$s/ >/dev/null) || exit 1; \
		echo "services/$$s/schema.sql"; \
	done

# Regenerate the Grafana dashboard from its generator.
dashboards:
	@$(GO) run ./devstack/cmd/dashboard > deploy/grafana/dashboards/partner-api.json

# The docker compose stack's secrets, random, written once to .env (which
# compose reads): a secret .env lacks (one a newer version added) is added,
# and the ones it has are kept (POSTGRES_PASSWORD is its volume's); the
# version and revision its images are stamped with.
SECRETS := INTERNAL_TOKEN QUOTE_SECRET CONSENT_SECRET ORDERS_SECRET BANK_PROVIDER_KEY POSTGRES_PASSWORD GRAFANA_ADMIN_PASSWORD
env:
	@touch .env; chmod 600 .env; \
		for k in $(SECRETS); do grep -q "^$$k=" .env || { echo "$$k=$$(od -An -N32 -tx1 /dev/urandom | tr -d " \n")" >> .env; echo "added $$k to .env"; }; done
	@grep -q '^DEPOSIT_SEED=' .env || { echo "DEPOSIT_SEED=$$(od -An -N32 -tx1 /dev/urandom | tr -d " \n")" >> .env; echo "added DEPOSIT_SEED to .env"; }
	@grep -q '^DEPOSIT_XPUB=' .env || { echo "DEPOSIT_XPUB=$$(cd devstack && $(GO) run ./cmd/devstack deposit-key $$(grep '^DEPOSIT_SEED=' ../.env | cut -d= -f2))" >> .env; \
		echo "added DEPOSIT_XPUB (the deposit wallet's public key, from DEPOSIT_SEED) to .env"; }
	@grep -q '^DEPOSIT_XPRV=' .env || { echo "DEPOSIT_XPRV=$$(cd devstack && $(GO) run ./cmd/devstack deposit-private-key $$(grep '^DEPOSIT_SEED=' ../.env | cut -d= -f2))" >> .env; \
		echo "added DEPOSIT_XPRV (its private side: the signer sweeps deposits home with it) to .env"; }
	@sed -i '/^VERSION=\|^REVISION=/d' .env; echo "VERSION=$(VERSION)" >> .env; echo "REVISION=$(REVISION)" >> .env

# A sandbox key for the docker compose stack, printed here once (never logged).
key:
	@docker compose exec gateway /usr/local/bin/service keys issue \
		--file /var/lib/partnerapi/keys.json --id dev-$$(date +%s) --products bank,fiat,deposit,card \
		--source-chains 84532,11155111 --destination-chains 84532,11155111 \
		--tokens 84532:0x036CbD53842c5426634e7929541eC2318f3dCF7e,84532:0x808456652fdb597867f38412077A9182bf77359F,11155111:0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238,11155111:0x08210F9170F89Ab7658F0B5E3fF39b0E03C594D4 \
		--rate 10 --max-execution-usd 25000

clean:
	rm -rf $(BIN)
