# protocol tests and fuzz target
