locals {
  account = "prod"
}
