"""Doctor checks and the PhysX contact-buffer budget."""
