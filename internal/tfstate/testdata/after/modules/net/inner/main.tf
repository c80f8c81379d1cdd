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

resource "filer_file" "route" {
  for_each = { main = "0.0.0.0/0" }
  path     = "out/net-${var.name}-route-${each.key}"
  content  = each.value
}
