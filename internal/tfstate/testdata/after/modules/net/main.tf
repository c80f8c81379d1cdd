terraform {
  required_providers {
    filer = {
      source = "gantryhq/filer"
    }
  }
}

variable "name" {
  type = string
}

resource "filer_file" "subnet" {
  count   = 1
  path    = "out/net-${var.name}-subnet"
  content = var.name
}

resource "terraform_data" "label" {
  input = var.name
}

module "inner" {
  source = "./inner"
  name   = var.name
}
