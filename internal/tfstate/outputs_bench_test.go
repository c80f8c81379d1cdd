package tfstate

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// showPair is a plan's and a state's show -json of a unit with n
// resources and n/4 outputs (a list, a map and a string each), one output
// changed by the apply.
func showPair(n int) (plan, state []byte) {
	resources := make([]map[string]any, n)
	for i := range resources {
		resources[i] = map[string]any{"address": fmt.Sprintf("terraform_data.r%d", i), "mode": "managed", "type": "terraform_data",
			"name": fmt.Sprintf("r%d", i), "provider_name": "terraform.io/builtin/terraform", "values": map[string]any{"input": "v", "id": fmt.Sprint(i)}}
	}
	outputs := func(changed string) map[string]any {
		out := map[string]any{}
		for i := 0; i < n/4; i++ {
			out[fmt.Sprintf("o%d", i)] = map[string]any{"sensitive": i%10 == 0, "value": map[string]any{
				"ids": []string{fmt.Sprintf("subnet-%d-a", i), fmt.Sprintf("subnet-%d-b", i)}, "name": fmt.Sprintf("net-%d", i)}}
		}
		out["o0"] = map[string]any{"sensitive": false, "value": changed}
		return out
	}
	values := func(changed string) map[string]any {
		return map[string]any{"outputs": outputs(changed), "root_module": map[string]any{"resources": resources}}
	}
	plan, _ = json.Marshal(map[string]any{"format_version": "1.2", "planned_values": values("v2"), "prior_state": map[string]any{"values": values("v1")}})
	state, _ = json.Marshal(map[string]any{"format_version": "1.0", "values": values("v2")})
	return plan, state
}

// BenchmarkChangedOutputsVsNewResources alternates, on the same show
// outputs, the ripple's comparison of outputs with the reading of new
// provider resources every successful apply already does (rollback), and
// reports the ratio: what the ripple adds to an apply in-process.
func BenchmarkChangedOutputsVsNewResources(b *testing.B) {
	plan, state := showPair(1000)
	var outputs, resources time.Duration
	for b.Loop() {
		t0 := time.Now()
		changed, err := ChangedOutputs(plan, state)
		if err != nil || len(changed) != 1 {
			b.Fatal(changed, err)
		}
		t1 := time.Now()
		prior, err := PriorResources(plan)
		if err != nil {
			b.Fatal(err)
		}
		after, err := StateResources(state)
		if err != nil {
			b.Fatal(err)
		}
		NewProviderResources(prior, after)
		t2 := time.Now()
		outputs += t1.Sub(t0)
		resources += t2.Sub(t1)
	}
	b.ReportMetric(float64(outputs.Microseconds())/float64(b.N), "outputs-µs/op")
	b.ReportMetric(float64(resources.Microseconds())/float64(b.N), "resources-µs/op")
	b.ReportMetric(float64(outputs)/float64(resources), "ratio")
	b.ReportMetric(float64(len(plan)+len(state))/1024, "KiB")
}
