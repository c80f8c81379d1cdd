.DEFAULT_GOAL := help
GO ?= go

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

dev: ## run Gantry on http://localhost:8080 with a private database and demo data
	$(GO) run ./cmd/gantry dev --demo

test: ## every check and every test (installs Chromium and the Playwright driver if missing)
	scripts/test

generate: ## regenerate templ code
	$(GO) tool templ generate

verify: generate ## generated code and go.mod are current
	@git diff --exit-code -- '*_templ.go' || (echo "commit the regenerated templ files" && exit 1)
	$(GO) mod tidy -diff

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go') && exit 1)
	$(GO) vet ./...

unit: ## Go tests without the browser tests
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v /e2e)

e2e: ## browser tests only
	scripts/install-e2e-tools
	$(GO) test -race -count=1 -timeout 30m ./e2e/

build: ## build bin/gantry
	$(GO) build -trimpath -o bin/gantry ./cmd/gantry

.PHONY: help dev test generate verify lint unit e2e build
