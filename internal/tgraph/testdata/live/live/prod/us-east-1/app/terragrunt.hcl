include "root" {
  path = find_in_parent_folders("root.hcl")
}

include "envcommon" {
  path   = "${dirname(find_in_parent_folders("root.hcl"))}/_envcommon/app.hcl"
  expose = true
}

dependency "db" {
  config_path = "../db"
}

inputs = {
  db_url = dependency.db.outputs.url
  env    = include.envcommon.locals.env
}
