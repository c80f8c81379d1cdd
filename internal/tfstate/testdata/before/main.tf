# The unit before the deployment: the built-in provider only.
resource "terraform_data" "existing" {
  input = "v1"
}
