terraform {
  source = "git::https://example.com/modules.git//x?ref=v1"
}
