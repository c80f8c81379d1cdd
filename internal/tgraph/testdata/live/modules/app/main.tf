resource "terraform_data" "app" {}
