locals {
  name = "prod"
}
