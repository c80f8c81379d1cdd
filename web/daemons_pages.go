package web

// daemonPages registers the area's pages.
func (s *daemonsHandlers) daemonPages(r *Router) {
}
