"""Plain data and rules of the domain; imports nothing else of Paddock."""
