"""What each inference engine is: launch commands, log rules, health semantics, stream parsing."""
