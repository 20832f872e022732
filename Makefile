# The partner payments API. `make run` starts the sandbox stack locally;
# `make test` is what CI runs.
SHELL := /bin/bash
MODULES := pkg services/gateway services/payout services/fiat services/consent services/sandboxbank devstack
SERVICES := gateway payout fiat consent sandboxbank
BIN := bin
GO ?= go

.PHONY: build test test-short run bench lint fmt clean

build:
	@mkdir -p $(BIN)
	@for s in $(SERVICES); do \
		(cd services/$$s && GOWORK=off $(GO) build -trimpath -o ../../$(BIN)/$$s ./cmd/$$s) || exit 1; \
	done
	@(cd devstack && $(GO) build -trimpath -o ../$(BIN)/devstack ./cmd/devstack)

# Every module, with the race detector. The end-to-end tests build the
# binaries themselves and start them with a real redis-server.
test: lint
	@for m in $(MODULES); do \
		echo "== $$m"; \
		(cd $$m && $(GO) test -race -count=1 ./...) || exit 1; \
	done

run: build
	@$(BIN)/devstack

bench:
	@cd services/gateway && $(GO) test -run '^$$' -bench . -benchmem ./internal/edge/
	@cd services/payout && $(GO) test -run '^$$' -bench . -benchmem ./internal/payout/

lint:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@if command -v staticcheck >/dev/null 2>&1; then \
		for m in $(MODULES); do (cd $$m && staticcheck ./...) || exit 1; done; \
	else echo "staticcheck not installed (go install honnef.co/go/tools/cmd/staticcheck@latest); skipped"; fi

fmt:
	@gofmt -w $(MODULES)

clean:
	rm -rf $(BIN)
