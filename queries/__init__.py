"""errscope's read side: named SQL files, the runner that binds their parameters, detection."""
