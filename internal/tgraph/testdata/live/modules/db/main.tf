resource "terraform_data" "db" {}
