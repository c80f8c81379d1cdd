package tgraph_test

import (
	"fmt"
	"os"
	"testing/fstest"

	"github.com/gantryhq/gantry/internal/tgraph"
)

func Example() {
	checkout := fstest.MapFS{
		"root.hcl":            {Data: []byte("remote_state {\n  backend = \"s3\"\n}\n")},
		"modules/vpc/main.tf": {Data: []byte("")},
		"live/vpc/terragrunt.hcl": {Data: []byte(`include "root" {
  path = find_in_parent_folders("root.hcl")
}
terraform {
  source = "${get_repo_root()}/modules/vpc"
}
`)},
		"live/app/terragrunt.hcl": {Data: []byte(`include "root" {
  path = find_in_parent_folders("root.hcl")
}
dependency "vpc" {
  config_path = "../vpc"
}
`)},
	}
	g, err := tgraph.ScanFS(checkout, "/repo")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tgraph.WriteText(os.Stdout, g, "."); err != nil {
		fmt.Println(err)
	}

	// A pull request changing the module and removing a unit.
	a := g.Affected([]string{"modules/vpc/main.tf", "live/old/terragrunt.hcl"})
	fmt.Println("changed:", a.Changed)
	fmt.Println("selected:", a.Selected)
	fmt.Println("deleted:", a.Deleted)
	// Output:
	// live/vpc
	// live/app	after live/vpc
	// changed: [live/vpc]
	// selected: [live/vpc live/app]
	// deleted: [live/old]
}
