# icehold: make run (local, embedded AWS), make test (every test).
GO       ?= go
FUNCTIONS := $(notdir $(wildcard functions/*))
# Counted, not timed: a timed -fuzztime trips golang/go#75804 on Go 1.26
# ("context deadline exceeded" at the deadline, no failing input).
FUZZTIME ?= 3000x
# target:package
FUZZ_TARGETS := FuzzCommitTable:./shared/router/ FuzzCreateTable:./shared/router/ FuzzNamespaceRequests:./shared/router/ \
	FuzzTransaction:./shared/router/ FuzzNamespacePath:./shared/router/ FuzzParse:./shared/objects/ \
	FuzzDecodeStrict:./shared/catalog/ FuzzMatch:./shared/iampolicy/

export GOFLAGS ?= -buildvcs=false
export CDK_DISABLE_CLI_TELEMETRY = true
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION = 20

.PHONY: install run test test-race test-moto vet lint-cfn fuzz bench e2e e2e-external sim soak mutate invoke invoke-seed invoke-all lambdas synth preflight localstack-up localstack-deploy clean

## install: the icehold CLI into $(go env GOBIN), else $(go env GOPATH)/bin; the first
## build compiles iceberg-go, Arrow and the AWS SDK (minutes, see the README), later ones seconds
install:
	$(GO) install ./cmd/icehold
	@bin=$$($(GO) env GOBIN); bin=$${bin:-$$($(GO) env GOPATH)/bin}; echo "installed $$bin/icehold"; \
	case ":$$PATH:" in *":$$bin:"*) ;; *) echo "$$bin is not on your PATH: export PATH=\"$$bin:\$$PATH\"";; esac

## run: the whole product on this machine, state in .icehold/, on ports 8180-8185
## (PORTS=9680: on 9680-9685)
PORTS ?= 8180
run:
	$(GO) run ./cmd/icehold local --ports $(PORTS)

# The e2e tests whose point is concurrency run under the race detector in make test, the rest of the
# suite without it (4-5 times faster; docs/design/tests.md, "Tests and CI time"); make test-race runs the
# whole suite under it.
E2E_RACE ?= Race|Racing|Concurren

## test: vet, cfn-lint on the synthesized template, every package's tests with the race detector,
## the e2e suite (its concurrency tests under the race detector), its external-endpoint subset
## against an icehold local process (e2e-external, about 1.5 minutes with its build), the lifecycle
## simulation (about 2 minutes), each fuzz target briefly, then test-moto
test: vet lint-cfn
	$(GO) test -race -count=1 -timeout 40m $$($(GO) list ./... | grep -v -e '/e2e$$' -e '/sim$$')
	$(GO) test -count=1 -timeout 40m -skip '$(E2E_RACE)' ./e2e/
	$(GO) test -race -count=1 -timeout 40m -run '$(E2E_RACE)' ./e2e/
	$(MAKE) e2e-external
	$(MAKE) sim
	$(MAKE) fuzz
	$(MAKE) test-moto

## test-race: the whole e2e suite under the race detector (about 15 minutes on 2 cores)
test-race:
	$(GO) test -race -count=1 -timeout 60m ./e2e/

# The lifecycle simulation's CI budget (docs/design/simulation.md, "Lifecycle simulation").
SIM_SEEDS ?= 1+6
SIM_STEPS ?= 150

## sim: the lifecycle simulation (SIM_SEEDS x SIM_STEPS) and its regression tests, without the
## race detector (it drives the whole composition, as e2e does, which runs under it); prints the
## coverage table (every operation kind, barrier and template: how often it ran and changed state)
sim:
	@cov=$$(mktemp); SIM_COVERAGE=$$cov $(GO) test -count=1 -timeout 20m ./sim/ -sim.seeds=$(SIM_SEEDS) -sim.steps=$(SIM_STEPS); \
	rc=$$?; cat $$cov; rm -f $$cov; exit $$rc

SEEDS ?= 1000+100
STEPS ?= 300

## soak: the simulation for longer: make soak SEEDS=1000+20 STEPS=400 (runs every seed, two processes
## per core, then names each failing seed with its replay command)
soak:
	GO=$(GO) bash sim/soak.sh $(SEEDS) $(STEPS)

## mutate: the mutation suite (sim/mutations/*.mut, realistic bugs) applied one at a time to a
## temporary worktree of the committed tree, each run at make sim's budget; prints the kill table.
## M=name (or M="a b") runs those only.
mutate:
	SIM_SEEDS=$(SIM_SEEDS) SIM_STEPS=$(SIM_STEPS) bash sim/mutate.sh $(M)

## test-moto: the store contract, the S3 contract, purge adapter and an e2e subset against moto_server
## (about 3 minutes on 2 cores); skipped, saying why, when moto_server is not on PATH, except
## under CI=true where its absence fails
test-moto:
	GO=$(GO) bash moto/test.sh

## vet: gofmt, go.mod/go.sum tidy (go mod tidy -diff prints nothing), go vet
vet:
	@d=$$($(GO) mod tidy -diff 2>&1) || { echo "$$d"; echo "go.mod/go.sum are not tidy (the diff above): run go mod tidy and commit the result"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || (gofmt -l . ; echo "gofmt needed"; exit 1)
	$(GO) vet ./...

fuzz:
	@for tp in $(FUZZ_TARGETS); do \
		t=$${tp%%:*}; p=$${tp#*:}; \
		echo "fuzz $$t in $$p ($(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$p || exit 1; \
	done

## bench: the SPEC §8 figures beside their baselines and their previous values,
## in-process and against bench/s3model's S3 limits, and the local restart
## (about 3.5 minutes on 2 cores)
bench:
	@start=$$(date +%s); \
	$(GO) test -run='^$$' -bench=. -benchtime=1x -count=1 -timeout=30m ./bench/ || exit 1; \
	$(GO) test -run='^$$' -bench=PurgeVersioned -benchtime=1x -count=1 ./shared/purge/ || exit 1; \
	echo "make bench: $$(( $$(date +%s) - start )) s"

## e2e: the end-to-end suite; E2E_ENDPOINT=<url> E2E_TOKEN=<token> [E2E_CATALOG=<name>] to aim it elsewhere
e2e:
	E2E_ENDPOINT=$(E2E_ENDPOINT) E2E_TOKEN=$(E2E_TOKEN) E2E_CATALOG=$(E2E_CATALOG) $(GO) test -count=1 -v ./e2e/

# The e2e tests that run against any endpoint (the others need the in-process
# server's faults and clock, and skip there): about 20 s on 2 cores.
E2E_EXTERNAL_RUN ?= ^(TestIcebergGoConformance|TestIdempotencyKey|TestTableLifeThroughRESTCatalog|TestNamespaceDropNeverRacesAChild|TestDurationsAreStoredInISO8601|TestSigV4|TestSigV4Example)$$

## e2e-external: the e2e suite as make e2e E2E_ENDPOINT=… runs it, against a separately started `icehold local` process on free
## ports (a catalog e2e without soft delete, as the suite expects; a local IAM user made with
## `icehold local iam add-user` signs the SigV4 tests, iceberg-go's catalogtest among them): the mode that aims the suite at
## LocalStack or AWS, exercised in make test on a subset (E2E_EXTERNAL_RUN; its tests about 25 s, with the build 1.5 minutes on 2 cores)
e2e-external:
	@dir=$$(mktemp -d) && trap 'kill $$pid 2>/dev/null; wait $$pid 2>/dev/null; rm -rf "$$dir"' EXIT && \
	$(GO) build -o "$$dir/icehold" ./cmd/icehold && \
	{ "$$dir/icehold" local --ports 0 --dir "$$dir/state" >"$$dir/server.log" 2>&1 & pid=$$!; } && \
	for i in $$(seq 600); do [ -s "$$dir/state/local.json" ] && "$$dir/icehold" local env --dir "$$dir/state" >/dev/null 2>&1 && break; \
	  kill -0 $$pid 2>/dev/null || { cat "$$dir/server.log"; exit 1; }; sleep 0.2; done && \
	"$$dir/icehold" catalogs create e2e --warehouse "s3://$$(jq -r .bucket "$$dir/state/local.json")/e2e" --dir "$$dir/state" >/dev/null && \
	eval "$$("$$dir/icehold" local iam add-user e2e --dir "$$dir/state" 2>/dev/null)" && \
	E2E_SIGV4_ACCESS_KEY_ID="$$AWS_ACCESS_KEY_ID" E2E_SIGV4_SECRET_ACCESS_KEY="$$AWS_SECRET_ACCESS_KEY" \
	E2E_ENDPOINT="$$(jq -r .rest_url "$$dir/state/local.json")" E2E_TOKEN="$$(jq -r .admin_token "$$dir/state/local.json")" \
	  E2E_CATALOG=e2e $(GO) test -count=1 -v -run '$(E2E_EXTERNAL_RUN)' ./e2e/

## invoke: FN=api EVENT=events/api/01-config.json, against a running make run
## (make invoke-seed once first: the state the samples name)
invoke:
	$(GO) run ./cmd/icehold invoke $(FN) $(EVENT)

## invoke-seed: make the tables and purge jobs the sample events name
invoke-seed:
	$(GO) run ./cmd/icehold invoke seed

## invoke-all: seed, then every sample event in file order (on a fresh make run)
invoke-all:
	@bin=$$(mktemp -d)/icehold && $(GO) build -o $$bin ./cmd/icehold && \
	$$bin invoke seed && \
	for ev in events/*/*.json; do \
		fn=$$(basename $$(dirname $$ev)); echo "== $$fn $$ev"; \
		$$bin invoke $$fn $$ev || exit 1; \
	done

## lambdas: one bootstrap per function for provided.al2023 on arm64 (LAMBDA_ARCH=amd64 for x86_64,
## deployed with -c icehold:arch=x86_64), stripped and lean (tools/lambdabuild: docs/design/infra.md,
## Lean functions)
LAMBDA_ARCH ?= arm64
lambdas:
	$(GO) run ./tools/lambdabuild -goos linux -arch $(LAMBDA_ARCH) -o dist $(addprefix ./functions/,$(FUNCTIONS))

NPM_TOOLS := .npm/node_modules/.bin

$(NPM_TOOLS)/cdk: .npm/package.json .npm/package-lock.json
	cd .npm && npm ci --no-audit --no-fund
	touch $@

## synth: the CloudFormation template of the stack (cdk deploy deploys the same), and a line naming
## its stateful resources; CDK_ARGS='-c icehold:kms-key=…' passes context values (docs/operations.md)
synth: lambdas $(NPM_TOOLS)/cdk
	rm -f cdk.out/*.template.json
	CDK_HOME=$(CURDIR)/.npm/cdk-home $(NPM_TOOLS)/cdk synth --no-notices -o cdk.out $(CDK_ARGS) > /dev/null
	@ls cdk.out/*.template.json
	@for t in cdk.out/*.template.json; do $(GO) run ./infra/stateful $$t || exit 1; done

## preflight: before a deploy, does the synthesized stack fit the account's Lambda concurrency, and
## what to raise (AWS credentials: AWS_PROFILE, AWS_REGION)
preflight: synth
	@for t in cdk.out/*.template.json; do $(GO) run ./cmd/icehold preflight --template $$t --stack $$(basename $$t .template.json) || exit 1; done

CFN_LINT ?= cfn-lint

## lint-cfn: cfn-lint on the template make synth writes; zero errors, and the
## warnings kept are ignored by name in .cfnlintrc (why: docs/design/infra.md)
lint-cfn: synth
	$(CFN_LINT) --version
	$(CFN_LINT) cdk.out/*.template.json

localstack-up:
	bash localstack/up.sh

localstack-deploy: $(NPM_TOOLS)/cdk
	bash localstack/deploy.sh

clean:
	rm -rf dist cdk.out infra/cdk.out
