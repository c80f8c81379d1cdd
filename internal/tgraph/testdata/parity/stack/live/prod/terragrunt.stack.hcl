locals {
  catalog = "../../catalog"
}

unit "vpc" {
  source = "${local.catalog}/units/vpc"
  path   = "vpc"
  values = {
    cidr = "10.0.0.0/16"
  }
}

unit "app" {
  source = "${local.catalog}/units/app"
  path   = "app"
  values = {
    vpc_path = "../vpc"
  }
}

stack "services" {
  source = "${local.catalog}/stacks/services"
  path   = "services"
  values = {
    vpc_path = "../../../vpc"
  }
}

unit "remote" {
  source = "git::https://example.com/catalog.git//units/cache?ref=v1.0.0"
  path   = "remote"
}
