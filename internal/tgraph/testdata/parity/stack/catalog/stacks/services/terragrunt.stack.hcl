unit "api" {
  source = "${get_repo_root()}/catalog/units/app"
  path   = "api"
  values = {
    vpc_path = values.vpc_path
  }
}
