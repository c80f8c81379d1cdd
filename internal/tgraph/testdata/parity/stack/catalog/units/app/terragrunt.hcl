locals {
  policy = file("policy.json")
}

dependency "vpc" {
  config_path = values.vpc_path
}

terraform {
  source = "git::https://example.com/modules.git//app?ref=v1.2.0"
}
