// Package tfstate reads what `terraform show -json` prints of a state or a
// saved plan, and finds the resources of the providers a deployment
// introduced to a unit: what a rollback of that deployment must destroy
// so that the unit can still be initialised once the provider is gone.
package tfstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Resource is one resource instance of a state.
type Resource struct {
	// Address is the full address: module path and index included
	// (module.net["a"].filer_file.x[0]), what -target needs.
	Address      string `json:"address"`
	Mode         string `json:"mode"` // "managed" or "data"
	Type         string `json:"type"`
	ProviderName string `json:"provider_name"` // registry.terraform.io/hashicorp/null
}

// Managed reports whether r is a resource terraform can destroy (not a
// data source).
func (r Resource) Managed() bool { return r.Mode == "managed" }

type module struct {
	Resources    []Resource `json:"resources"`
	ChildModules []module   `json:"child_modules"`
}

type values struct {
	RootModule module `json:"root_module"`
}

type show struct {
	FormatVersion string  `json:"format_version"`
	Values        *values `json:"values"` // a state's
	PriorState    *struct {
		Values *values `json:"values"`
	} `json:"prior_state"` // a saved plan's: the state it was planned against
	PlannedValues *values `json:"planned_values"` // present in every plan
}

var errNotShow = errors.New("not the output of terraform show -json (no format_version)")

func parse(b []byte) (*show, error) {
	var s show
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading terraform show -json: %w", err)
	}
	if s.FormatVersion == "" {
		return nil, errNotShow
	}
	return &s, nil
}

// StateResources lists every resource of a state, from `terraform show
// -json` without a plan file; modules' resources included. An empty state
// has none.
func StateResources(stateJSON []byte) ([]Resource, error) {
	s, err := parse(stateJSON)
	if err != nil {
		return nil, err
	}
	if s.PlannedValues != nil {
		return nil, errors.New("this is a plan's terraform show -json, not a state's")
	}
	return flatten(s.Values), nil
}

// PriorResources lists the resources of the state a saved plan was made
// against, from `terraform show -json PLANFILE`: the state before its
// apply. A plan of an empty state has none.
func PriorResources(planJSON []byte) ([]Resource, error) {
	s, err := parse(planJSON)
	if err != nil {
		return nil, err
	}
	if s.PlannedValues == nil {
		return nil, errors.New("this is a state's terraform show -json, not a saved plan's")
	}
	if s.PriorState == nil {
		return nil, nil
	}
	return flatten(s.PriorState.Values), nil
}

func flatten(v *values) []Resource {
	if v == nil {
		return nil
	}
	var out []Resource
	var walk func(m module)
	walk = func(m module) {
		out = append(out, m.Resources...)
		for _, c := range m.ChildModules {
			walk(c)
		}
	}
	walk(v.RootModule)
	return out
}

// Providers lists the providers of rs (data sources' included), sorted,
// each once.
func Providers(rs []Resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ProviderName)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NewProviderResources returns the providers of after that are not in
// before (the providers a deployment introduced) and the addresses of
// after's managed resources that belong to them, both sorted. A provider
// that was in before only through a data source was not introduced.
func NewProviderResources(before, after []Resource) (providers, addresses []string) {
	had := map[string]bool{}
	for _, r := range before {
		had[r.ProviderName] = true
	}
	for _, r := range after {
		if had[r.ProviderName] || !r.Managed() {
			continue
		}
		providers = append(providers, r.ProviderName)
		addresses = append(addresses, r.Address)
	}
	slices.Sort(providers)
	slices.Sort(addresses)
	return slices.Compact(providers), slices.Compact(addresses)
}
