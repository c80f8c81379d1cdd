package tfstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// output is a root output as show -json prints it. Sensitive values are
// printed in clear in show -json; they are only compared here, never kept.
type output struct {
	Sensitive bool            `json:"sensitive"`
	Value     json.RawMessage `json:"value"`
}

type outputsShow struct {
	FormatVersion string `json:"format_version"`
	Values        *struct {
		Outputs map[string]output `json:"outputs"`
	} `json:"values"`
	PriorState *struct {
		Values *struct {
			Outputs map[string]output `json:"outputs"`
		} `json:"values"`
	} `json:"prior_state"`
	PlannedValues json.RawMessage `json:"planned_values"`
}

// ChangedOutputs names the root outputs whose value differs between the
// state a saved plan was made against (planJSON, `show -json PLANFILE`)
// and the state after its apply (stateJSON, `show -json`): changed,
// added or removed, sorted. Values are compared as JSON, whatever their
// order of object keys; a sensitive output is compared like any other and
// only its name is returned.
func ChangedOutputs(planJSON, stateJSON []byte) ([]string, error) {
	var plan, state outputsShow
	if err := json.Unmarshal(planJSON, &plan); err != nil {
		return nil, fmt.Errorf("reading terraform show -json of the plan: %w", err)
	}
	if err := json.Unmarshal(stateJSON, &state); err != nil {
		return nil, fmt.Errorf("reading terraform show -json of the state: %w", err)
	}
	if plan.FormatVersion == "" || state.FormatVersion == "" {
		return nil, errNotShow
	}
	if plan.PlannedValues == nil {
		return nil, errors.New("this is a state's terraform show -json, not a saved plan's")
	}
	if state.PlannedValues != nil {
		return nil, errors.New("this is a plan's terraform show -json, not a state's")
	}
	var before, after map[string]output
	if plan.PriorState != nil && plan.PriorState.Values != nil {
		before = plan.PriorState.Values.Outputs
	}
	if state.Values != nil {
		after = state.Values.Outputs
	}
	var changed []string
	for name, a := range after {
		b, ok := before[name]
		if !ok {
			changed = append(changed, name)
			continue
		}
		same, err := sameJSON(a.Value, b.Value)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		if !same {
			changed = append(changed, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return changed, nil
}

// sameJSON compares two JSON values by meaning: re-encoded from their
// decoded form, objects' keys come out sorted; numbers stay as written
// (terraform prints a value the same way each time), so no change is lost
// to rounding.
func sameJSON(a, b json.RawMessage) (bool, error) {
	if bytes.Equal(a, b) {
		return true, nil
	}
	ca, err := canonical(a)
	if err != nil {
		return false, err
	}
	cb, err := canonical(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

func canonical(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
