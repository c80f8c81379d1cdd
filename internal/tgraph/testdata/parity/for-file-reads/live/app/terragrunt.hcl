locals {
  names    = ["../../policies/read.json", "../../policies/write.json"]
  contents = [for f in local.names : file(f)]
  present  = [for f in ["../../policies/admin.json", "../../policies/read.json"] : f if fileexists(f)]
  marked   = { for i, f in local.names : i => mark_as_read("${get_terragrunt_dir()}/${f}") }
}

dependency "vpc" {
  config_path = "../vpc"
}

inputs = {
  policies = local.contents
}
