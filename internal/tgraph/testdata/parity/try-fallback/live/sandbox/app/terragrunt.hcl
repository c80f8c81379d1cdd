locals {
  env  = try(read_terragrunt_config(find_in_parent_folders("env.hcl")).locals, {})
  name = lookup(local.env, "name", "shared")
}

dependencies {
  paths = ["../../${local.name == "prod" ? "prod" : "shared"}/../shared"]
}
