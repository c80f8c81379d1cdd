package tfstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// PlannedDeletes lists, sorted, the addresses of the managed resources a
// saved plan deletes (replacements included), from `terraform show -json
// PLANFILE`'s resource_changes. A destroy plan with -target deletes the
// targets and everything that depends on them: this is what it really
// destroys.
func PlannedDeletes(planJSON []byte) ([]string, error) {
	var p struct {
		FormatVersion   string          `json:"format_version"`
		PlannedValues   json.RawMessage `json:"planned_values"`
		ResourceChanges []struct {
			Address string `json:"address"`
			Mode    string `json:"mode"`
			Change  struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal(planJSON, &p); err != nil {
		return nil, fmt.Errorf("reading terraform show -json: %w", err)
	}
	if p.FormatVersion == "" {
		return nil, errNotShow
	}
	if len(p.PlannedValues) == 0 {
		return nil, errors.New("this is a state's terraform show -json, not a saved plan's")
	}
	var out []string
	for _, rc := range p.ResourceChanges {
		if rc.Mode == "managed" && slices.Contains(rc.Change.Actions, "delete") {
			out = append(out, rc.Address)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
