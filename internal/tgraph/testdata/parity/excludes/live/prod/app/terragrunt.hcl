dependency "vpc" {
  config_path = "../vpc"
}

dependency "legacy" {
  config_path = "../legacy"
}
