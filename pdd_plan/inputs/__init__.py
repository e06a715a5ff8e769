"""What the user gives: the scenario and plan schemas, the bundled profiles, the resolved context."""
