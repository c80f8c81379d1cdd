package gantryfile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/progression"
)

const validPipelines = `pipelines:
  - name: web
    timeout: 2m
    stages:
      - name: build
        artifacts: [x86, arm64]
      - name: beta
        after: [build]
        host_groups:
          - {name: east, hosts: [beta-1, beta-2]}
          - {name: west, hosts: [beta-3], arch: arm64}
        steps:
          - {name: deployed, run: ["./deploy.sh", "{host}", "{revision}", "{artifact}"]}
          - {name: tested, run: ["./test.sh", "{host}"], timeout: 30s}
      - name: approval
        after: [beta]
        approval: {voters: [ada@example.com, bob@example.com], min_approvals: 2}
      - name: prod
        after: [approval]
        batch: [deployed, tested]
        host_groups: [{name: all, hosts: [prod-1.example.com]}]
        steps:
          - {name: deployed, run: ["./deploy.sh", "{host}"]}
          - {name: tested, run: ["./test.sh", "{host}"]}
`

func parsePipelines(src string) ([]gantryfile.Pipeline, error) {
	f, err := gantryfile.Parse("gantry.yaml", []byte(src), nil, gantryfile.PipelinesSection)
	if err != nil {
		return nil, err
	}
	return gantryfile.SectionOf[[]gantryfile.Pipeline](f, gantryfile.PipelinesKey), nil
}

func TestPipelinesSectionReadsAPipeline(t *testing.T) {
	ps, err := parsePipelines(validPipelines)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	p := ps[0]
	require.Equal(t, 2*time.Minute, p.StepTimeout)
	require.Equal(t, 2*time.Minute, p.Stages[1].Steps[0].CommandTimeout, "the pipeline's timeout by default")
	require.Equal(t, 30*time.Second, p.Stages[1].Steps[1].CommandTimeout)
	require.Equal(t, 2, p.Stages[2].Approval.MinApprovals)
	require.Equal(t, 1, p.Stages[2].Approval.MinRejections, "one rejection stops by default")
	require.Equal(t, &progression.BatchSpec{First: "deployed", Last: "tested"}, p.Stages[3].BatchSpec)
	require.Equal(t, []string{"x86", "arm64"}, p.Architectures())

	shape, err := p.Shape()
	require.NoError(t, err)
	require.Equal(t, []progression.Step{{Event: "stage-approved", Target: "web/approval"}}, shape.Next(progression.Step{Event: "stage-started", Target: "web/approval"}))
	end, ok := shape.BatchEnd(progression.Step{Event: "host-deployed", Target: "web/prod/all/prod-1.example.com"})
	require.True(t, ok)
	require.Equal(t, "host-tested", end.Event)
}

func TestPipelinesSectionRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"a cycle in after, named, with its line", `pipelines:
  - name: web
    stages:
      - {name: build}
      - name: a
        after: [build, b]
      - name: b
        after: [a]
`, "gantry.yaml:6: pipelines[0].stages[1].after: after has a cycle: a → b → a"},
		{"an unknown stage in after", "pipelines:\n  - name: web\n    stages:\n      - {name: beta, after: [build]}\n",
			`gantry.yaml:4: pipelines[0].stages[0].after[0]: no stage named "build" in pipeline web`},
		{"an unknown placeholder", "pipelines:\n  - name: web\n    stages:\n      - name: beta\n        host_groups: [{name: g, hosts: [h]}]\n        steps: [{name: deployed, run: [x, \"{dir}\"]}]\n",
			"pipelines[0].stages[0].steps[0].run: unknown placeholder {dir}"},
		{"a batch in the wrong order", "pipelines:\n  - name: web\n    stages:\n      - name: beta\n        batch: [tested, deployed]\n        host_groups: [{name: g, hosts: [h]}]\n        steps: [{name: deployed, run: [x]}, {name: tested, run: [y]}]\n",
			"gantry.yaml:5: pipelines[0].stages[0].batch: deployed comes before tested"},
		{"a gate without voters", "pipelines:\n  - name: web\n    stages:\n      - {name: gate, approval: {voters: []}}\n",
			"pipelines[0].stages[0].approval.voters: at least one voter is required"},
		{"an architecture no build makes", "pipelines:\n  - name: web\n    stages:\n      - {name: build, artifacts: [x86]}\n      - name: beta\n        host_groups: [{name: g, hosts: [h], arch: riscv}]\n        steps: [{name: deployed, run: [x]}]\n",
			`pipelines[0].stages[1].host_groups[0].arch: no build stage of pipeline web waits for architecture "riscv" (it has x86)`},
		{"a step longer than an hour", "pipelines:\n  - name: web\n    stages:\n      - name: beta\n        host_groups: [{name: g, hosts: [h]}]\n        steps: [{name: deployed, run: [x], timeout: 2h}]\n",
			"pipelines[0].stages[0].steps[0].timeout: must be at most 1h0m0s"},
		{"a step on an unknown runner", "pipelines:\n  - name: web\n    stages:\n      - name: beta\n        host_groups: [{name: g, hosts: [h]}]\n        steps: [{name: deployed, run: [x], runs_on: host}]\n",
			`pipelines[0].stages[0].steps[0].runs_on: must be worker (a Gantry worker runs the command) or agent (the host's gantry agent runs it) (got "host")`},
		{"an unknown key", "pipelines:\n  - name: web\n    stages:\n      - {name: build, artefacts: [x86]}\n", "artefacts"},
		{"a host twice", "pipelines:\n  - name: web\n    stages:\n      - name: beta\n        host_groups: [{name: g, hosts: [h, h]}]\n        steps: [{name: deployed, run: [x]}]\n",
			`pipelines[0].stages[0].host_groups[0].hosts[1]: host "h" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePipelines(tc.src)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
