resource "terraform_data" "vpc" {}
