include "mid" {
  path = "${get_repo_root()}/_envcommon/mid.hcl"
}
