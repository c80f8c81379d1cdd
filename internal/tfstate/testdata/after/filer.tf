# What the deployment adds to testdata/before: a new provider, with resources at the root
# (count, for_each) and inside modules (for_each on a module, nested module).
terraform {
  required_providers {
    filer = {
      source  = "gantryhq/filer"
      version = "0.1.0"
    }
  }
}

resource "filer_file" "single" {
  path    = "out/single"
  content = "one"
}

resource "filer_file" "counted" {
  count   = 2
  path    = "out/counted-${count.index}"
  content = "counted"
}

resource "filer_file" "keyed" {
  for_each = toset(["a", "b"])
  path     = "out/keyed-${each.key}"
  content  = each.key
}

module "net" {
  source   = "./modules/net"
  for_each = toset(["east"])
  name     = each.key
}
