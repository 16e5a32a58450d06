package gateway

// Routes lists the route table as "METHOD path" patterns, for the external
// tests (the authorization matrix).
func (s *Server) Routes() []string {
	var out []string
	for _, rt := range s.routes() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// PanelRoutes lists the web panel's patterns.
func (s *Server) PanelRoutes() []string { return s.panel.Routes() }

// ProxyRoutes are the egress proxy's requests, which no pattern routes:
// the gateway's port takes them before its mux.
func (s *Server) ProxyRoutes() []string { return []string{"CONNECT host:port", "GET http://host/"} }
