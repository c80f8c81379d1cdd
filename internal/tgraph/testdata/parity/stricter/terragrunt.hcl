# The root configuration, included by every unit; not a unit itself.
remote_state {
  backend = "s3"
  config = {
    bucket = "state"
    key    = "${path_relative_to_include()}/terraform.tfstate"
    region = "eu-west-1"
  }
}
