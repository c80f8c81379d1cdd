locals {
  env_vars = read_terragrunt_config(find_in_parent_folders("env.hcl"))
  env      = local.env_vars.locals.env
}

terraform {
  source = "${get_repo_root()}/modules/app"
}

dependency "vpc" {
  config_path = "../vpc"

  mock_outputs = {
    vpc_id = "vpc-mock"
  }
}

inputs = {
  name   = "app-${local.env}"
  vpc_id = dependency.vpc.outputs.vpc_id
}
