include {
  path = find_in_parent_folders()
}

inputs = {
  policy = file("${get_repo_root()}/shared/policy.json")
}
