// Command terraform-provider-filer is the real Terraform provider Gantry's
// tests build and install through a filesystem mirror: its one resource,
// filer_file, writes a file on create and removes it on destroy, so a test
// sees exactly which resources a rollback destroyed. It is its own Go
// module so that Gantry's go.mod does not carry the plugin framework.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
)

// Address is the provider's source address, as configurations and
// `terraform show -json` name it.
const Address = "registry.terraform.io/gantryhq/filer"

func main() {
	if err := providerserver.Serve(context.Background(), newProvider, providerserver.ServeOpts{Address: Address}); err != nil {
		log.Fatal(err)
	}
}
