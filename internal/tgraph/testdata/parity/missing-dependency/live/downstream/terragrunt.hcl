dependency "broken" {
  config_path = "../broken"
}
