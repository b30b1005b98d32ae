"""What a real agent talks to in a test instead of a model or an account: the scripted model (`scripted_model`:
one script per agent, in the wire dialect of each provider) and the stand-in for ChatGPT's sign-in and backend
(`chatgpt_backend`), both on loopback."""
