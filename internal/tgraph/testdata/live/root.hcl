# Included by every unit; not a unit itself.
locals {
  account_vars = read_terragrunt_config(find_in_parent_folders("account.hcl"))
  region_vars  = read_terragrunt_config(find_in_parent_folders("region.hcl"))

  account_name = local.account_vars.locals.account_name
  aws_region   = local.region_vars.locals.aws_region
}

remote_state {
  backend = "s3"
  config = {
    bucket = "tfstate-${local.account_name}-${local.aws_region}"
    key    = "${path_relative_to_include()}/terraform.tfstate"
    region = local.aws_region
  }
}

inputs = merge(local.account_vars.locals, local.region_vars.locals)
