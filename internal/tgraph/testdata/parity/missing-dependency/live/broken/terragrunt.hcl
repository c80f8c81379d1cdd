dependency "gone" {
  config_path = "../gone"
}

dependency "vpc" {
  config_path = "../vpc"
}
