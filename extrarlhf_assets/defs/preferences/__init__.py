"""Preference data (DESIGN section 17): one partition per preference pool, ``preference_dataset``
(the pool's judgments as a versioned dataset, checked ``preference_ready``) -> ``reward_model``
(the Bradley-Terry reward model trained on it, checked against chance)."""
